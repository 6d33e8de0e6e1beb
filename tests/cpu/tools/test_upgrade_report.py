"""The upgrade report (``python -m fp8ref diff --format markdown|json``): fp8ref's 2.13 golden
against the profile of torch 2.9.1 + torchao 0.17.0 renders as a table with a meaning, a
consequence and a severity for every differing key; JSON round-trips; accepted differences are
marked with their reason; ``python -m fp8ref accept`` writes them."""

import copy
import json

import pytest

from fp8ref.__main__ import main
from fp8ref.harness.profiles import upgrade_report
from fp8ref.harness.profiles.golden import compare_with_golden
from fp8ref.harness.profiles.key_meanings import SEVERITIES
from fp8ref.harness.profiles.profile_file import diff, load, save
from fp8ref.harness.profiles.stack_identity import install_label, label_matches
from tests.common.paths import GOLDEN

OLDEST = (
    "torch 2.9.1, torchao 0.17.0, transformers 5.24.0, accelerate 1.15.0, safetensors 0.8.0, ml_dtypes 0.6.0, "
    "gfloat 0.5.2, expecttest 0.3.0"
)


@pytest.fixture
def golden():
    return load(GOLDEN / "cpu.json")


@pytest.fixture
def oldest(golden):
    """The profile torch 2.9.1 + torchao 0.17.0 gives: the golden with the differences measured on
    that install (tests/golden/cpu-installs.json, re-derived there with `python -m fp8ref diff`)."""
    named = json.loads((GOLDEN / "cpu-installs.json").read_text())[OLDEST]["differences"]
    p = copy.deepcopy(golden)
    p["behaviour"].update(named)
    p["versions"].update(torch="2.9.1+cu128", torchao="0.17.0")
    assert label_matches(OLDEST, p)  # (an older label, naming fp8ref's own packages too, still matches)
    return p


def _table_rows(markdown: str) -> list[list[str]]:
    """The cells of every change row (the tables under a family heading)."""
    rows = []
    for line in markdown.splitlines():
        if line.startswith("| ") and "`" in line.split("|")[2]:
            cells = [c.strip() for c in line.replace("\\|", "\0").strip("|").split("|")]
            rows.append([c.replace("\0", "|") for c in cells])
    return rows


def test_the_oldest_install_renders_as_a_table_with_meaning_consequence_and_severity(tmp_path, golden, oldest, capsys):
    save(oldest, tmp_path / "oldest.json")
    assert main(["diff", str(GOLDEN / "cpu.json"), str(tmp_path / "oldest.json"), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    differing = {k for k, _, _ in diff(golden, oldest)}
    rows = _table_rows(md)
    assert {r[1].strip("`") for r in rows} == differing and len(rows) == len(differing)
    for r in rows:
        severity, key, a, b, meaning, consequence = r
        assert severity.split()[0].strip("*") in SEVERITIES, r
        assert a and b and meaning and consequence, r
    assert f"**{len(differing)} of {len(golden['behaviour'])} keys differ**" in md
    # the heading names what differs between the installs, and nothing else
    assert md.splitlines()[0] == "### FP8 behaviour: torch 2.13.0+cpu -> 2.9.1+cu128, torchao 0.18.0 -> 0.17.0 (cpu)"
    # the overflow change is the kind that can silently change training numbers
    overflow = next(r for r in rows if r[1] == "`cast.e4m3fn.bf16.overflow`")
    assert overflow[0].startswith("**numerics**") and overflow[2:4] == ["`'saturate'`", "`'nonsaturate'`"]
    # a rowwise _scaled_mm that is now refused changes which paths run, and says which way
    rowwise = next(r for r in rows if r[1] == "`scaled_mm.rowwise.bf16`")
    assert rowwise[0].startswith("refusal") and rowwise[5].startswith("**now refused")
    # beside the golden, cpu-installs.json accepts every one of them for that install, with why
    assert all("(accepted)" in r[0] for r in rows) and "accepted on purpose: torch 2.9.1" in md


def test_json_round_trips_and_renders_the_same_markdown(tmp_path, oldest, capsys):
    save(oldest, tmp_path / "oldest.json")
    args = ["diff", str(GOLDEN / "cpu.json"), str(tmp_path / "oldest.json")]
    assert main([*args, "--format", "json"]) == 1
    text = capsys.readouterr().out
    report = upgrade_report.from_json(text)
    assert upgrade_report.render_json(report) == text
    assert main([*args, "--format", "markdown"]) == 1
    assert upgrade_report.render_markdown(report) == capsys.readouterr().out
    assert sum(report["counts"].values()) == len(report["changes"]) == report["accepted"]
    with pytest.raises(ValueError, match="not an fp8ref upgrade report"):
        upgrade_report.from_json(json.dumps({"fp8ref_profile": 1}))


def test_an_equal_pair_says_so_and_exits_0(golden, capsys):
    assert main(["diff", str(GOLDEN / "cpu.json"), str(GOLDEN / "cpu.json"), "--format", "markdown"]) == 0
    keys = len(golden["behaviour"])
    assert f"**No FP8 behaviour changed**: all {keys} keys compared are the same." in capsys.readouterr().out


def test_an_unexplained_key_is_reported_not_dropped(golden):
    now = copy.deepcopy(golden)
    now["behaviour"]["a_new_family.probe"] = "x"
    report = upgrade_report.build(golden, now)
    (change,) = report["changes"]
    assert change["family"] == "unexplained" and change["severity"] == "numerics"
    assert "no meaning is written" in change["meaning"]
    assert "`'x'`" in upgrade_report.render_markdown(report)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="a: expected a behaviour profile"):
        upgrade_report.build({"x": 1}, {"behaviour": {}})
    with pytest.raises(ValueError, match="level"):
        upgrade_report.render_markdown(upgrade_report.build({"behaviour": {}}, {"behaviour": {}}), level=9)


def test_accept_writes_the_named_differences_that_the_golden_test_then_accepts(tmp_path, golden, capsys):
    """A team's own golden: pin it, see a change fail naming the key, accept it with why, pass."""
    mine = tmp_path / "stack.json"
    save(golden, mine)
    now = copy.deepcopy(golden)
    now["behaviour"]["cast.e4m3fn.bf16.overflow"] = "nonsaturate"
    now["versions"]["torch"] = "2.99.0"
    save(now, tmp_path / "now.json")
    status, lines = compare_with_golden(mine, "cpu", now=now)
    assert status == "differs" and len(lines) == 1 and lines[0].startswith("cast.e4m3fn.bf16.overflow: pinned")
    assert main(["accept", str(mine), str(tmp_path / "now.json"), "--why", "  "]) == 2
    assert "--why" in capsys.readouterr().err
    assert main(["accept", str(mine), str(tmp_path / "now.json"), "--why", "we clip gradients first"]) == 0
    named = json.loads((tmp_path / "stack-installs.json").read_text())
    assert named == {
        install_label(now): {
            "why": "we clip gradients first",
            "differences": {"cast.e4m3fn.bf16.overflow": "nonsaturate"},
            "reasons": {"cast.e4m3fn.bf16.overflow": "we clip gradients first"},
        }
    }
    assert compare_with_golden(mine, "cpu", now=now) == ("named", [])
    capsys.readouterr()
    assert main(["diff", str(mine), str(tmp_path / "now.json"), "--format", "markdown"]) == 1
    assert "accepted on purpose: we clip gradients first" in capsys.readouterr().out
