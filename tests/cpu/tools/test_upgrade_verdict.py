"""An upgrade verdict a team can gate on: the package that changed is the one named, a package not
installed on one side is no difference, no comparison goes green silently (an empty golden path,
a golden of another device kind), severities follow one rule on every kind of change, a report
fits a pull-request comment, and accepting differences is per key and never silently replaces a
reason (fp8ref.harness.profiles: stack_identity, profile_file, golden, key_meanings,
upgrade_report; ``python -m fp8ref diff`` and ``accept``)."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest

from fp8ref.__main__ import main
from fp8ref.harness.profiles import upgrade_report
from fp8ref.harness.profiles.golden import compare_with_golden
from fp8ref.harness.profiles.key_meanings import KeyMeaning, severity_of, value_kind
from fp8ref.harness.profiles.profile_file import diff, format_diff, load, not_compared, save
from fp8ref.harness.profiles.stack_identity import install_label, label_matches
from tests.common.paths import GOLDEN
from tests.plugins.fixtures import golden_option


@pytest.fixture
def golden() -> dict:
    return load(GOLDEN / "cpu.json")


def _without_transformers(p: dict) -> dict:
    """``p`` as an install without transformers (and so accelerate) collects it."""
    out = copy.deepcopy(p)
    out["behaviour"] = {k: v for k, v in out["behaviour"].items() if not k.startswith("transformers")}
    out["behaviour"]["transformers.fp8"] = "missing"
    out["versions"].update(transformers=None, accelerate=None)
    return out


def test_a_package_installed_on_one_side_only_is_named_and_not_a_difference(golden, tmp_path, capsys):
    mine = _without_transformers(golden)
    assert diff(golden, mine) == [] and diff(mine, golden) == []
    (why, keys), *_ = not_compared(golden, mine).items()
    assert why == "transformers not installed in B" and len(keys) == 1 + sum(
        k.startswith("transformers") for k in golden["behaviour"]
    )
    assert compare_with_golden(GOLDEN, "cpu", now=mine) == ("equal", [])
    save(mine, tmp_path / "mine.json")
    assert main(["diff", str(GOLDEN / "cpu.json"), str(tmp_path / "mine.json"), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert (
        md.splitlines()[0]
        == "### FP8 behaviour: transformers 5.24.0 -> not installed, accelerate 1.15.0 -> not installed (cpu)"
    )
    assert f"- {len(keys)} keys: transformers not installed in B" in md


def test_accelerate_missing_on_one_side_leaves_out_from_pretrained_only(golden):
    now = copy.deepcopy(golden)
    now["behaviour"] = {k: v for k, v in now["behaviour"].items() if "from_pretrained" not in k}
    now["behaviour"]["transformers.fp8.from_pretrained"] = "missing: accelerate"
    now["versions"]["accelerate"] = None
    assert diff(golden, now) == []
    assert not_compared(golden, now) == {
        "accelerate not installed in B": [
            "transformers.fp8.from_pretrained",
            "transformers.fp8.from_pretrained.float",
            "transformers.fp8.from_pretrained.ue8m0",
        ]
    }


def test_a_boolean_is_not_a_number(golden):
    pinned, now = copy.deepcopy(golden), copy.deepcopy(golden)
    pinned["behaviour"]["x.flag"], now["behaviour"]["x.flag"] = False, 0
    assert diff(pinned, now) == [("x.flag", False, 0)]


def test_a_failure_line_names_the_package_that_changed(golden):
    now = copy.deepcopy(golden)
    now["versions"]["transformers"] = "5.30.0"
    now["behaviour"]["transformers.fp8.quantize.float"] = "definition"
    (line,) = format_diff(golden, now)
    assert line.startswith("transformers.fp8.quantize.float: pinned 'deviates: scale_through_reciprocal' (torch ")
    assert "transformers 5.24.0) -> now 'definition' (torch 2.13.0+cpu, torchao 0.18.0, transformers 5.30.0)" in line


def test_a_torchao_that_does_not_import_is_not_compared(golden):
    now = copy.deepcopy(golden)
    now["behaviour"] = {
        k: v
        for k, v in now["behaviour"].items()
        if not k.startswith(("torchao", "checkpoint.torchao", "grouped.torchao"))
    }
    now["behaviour"]["torchao"] = "refused: RuntimeError: torchao was built for another torch"
    assert diff(golden, now) == []
    assert list(not_compared(golden, now)) == [
        "torchao unusable: refused: RuntimeError: torchao was built for another torch in B"
    ]


def test_labels_name_every_package_and_older_labels_still_match(golden):
    label = install_label(golden)
    assert label.startswith("torch 2.13.0, torchao 0.18.0, transformers 5.24.0, accelerate 1.15.0")
    assert label_matches(label, golden) and label_matches("torch 2.13.0, torchao 0.18.0", golden)
    assert not label_matches(label, _without_transformers(golden))


def test_an_empty_golden_path_is_a_usage_error():
    class Config:
        def __init__(self, value):
            self.value = value

        def getoption(self, name):
            return self.value

    with pytest.raises(pytest.UsageError, match="--fp8-golden: .* got an empty value"):
        golden_option(Config(""))
    assert golden_option(Config(None)) is None


def test_a_golden_of_another_device_kind_is_neither_compared_nor_overwritten(golden, tmp_path, capsys):
    cuda = copy.deepcopy(golden)
    cuda["versions"]["device"] = "cuda-sm90"
    save(cuda, tmp_path / "stack.json")
    status, lines = compare_with_golden(tmp_path / "stack.json", "cpu", now=golden)
    assert status == "wrong device" and "'cuda-sm90'" in lines[0] and "'cpu'" in lines[0]
    status, _ = compare_with_golden(tmp_path / "stack.json", "cpu", now=golden, update=True)
    assert status == "wrong device" and load(tmp_path / "stack.json")["versions"]["device"] == "cuda-sm90"
    save(golden, tmp_path / "cpu.json")
    for argv in (["diff"], ["accept", "--why", "x"]):
        assert main([*argv, str(tmp_path / "stack.json"), str(tmp_path / "cpu.json")]) == 2
        err = capsys.readouterr().err
        assert "device kind 'cuda-sm90'" in err and "'cpu'" in err, err
        assert ("--any-device" in err) == (argv == ["diff"])  # (accept has no such option: not suggested)
    assert not (tmp_path / "stack-installs.json").exists()


VALUES = {
    "answer": "saturate",
    "another answer": "nonsaturate",
    "refused": "refused: RuntimeError: not supported",
    "other refusal words": "refused: NotImplementedError: not implemented for 'Float8_e4m3fn'",
    "refused on every dtype": "all refused",
    "fails": "fails: AssertionError: scales must be positive",
    "absent": "<absent>",
    "not installed": "missing",
}


# each value's kind, written out (not read from value_kind, the code under test)
KINDS = {
    "answer": "answer",
    "another answer": "answer",
    "refused": "refused",
    "other refusal words": "refused",
    "refused on every dtype": "refused",
    "fails": "fails",
    "absent": "absent",
    "not installed": "not installed",
}


@pytest.mark.parametrize("old,new", list(itertools.permutations(VALUES, 2)))
def test_the_severity_of_every_kind_of_change_follows_one_rule(old, new):
    row = KeyMeaning("x", "family", "m", "c", "numerics")
    if KINDS[old] != KINDS[new]:
        want = "refusal"  # into or out of a refusal, a failure, an absence, a missing package
    elif KINDS[old] == "answer":
        want = "numerics"  # two answers: the row's severity
    else:
        want = "cosmetic"  # two messages of one kind
    assert severity_of(row, VALUES[old], VALUES[new]) == want, (old, new)


def test_the_kinds_of_value():
    assert {name: value_kind(v) for name, v in VALUES.items()} == KINDS
    assert value_kind("e4m3fn=runs e5m2=refused") == value_kind("either+partial") == "answer"


def test_a_summary_report_fits_a_pull_request_comment_for_any_upgrade(golden):
    now = copy.deepcopy(golden)
    now["versions"].update(torch="3.0.0", torchao="1.0.0")
    now["behaviour"] = {k: f"refused: RuntimeError: {'x' * 200} {k}" for k in golden["behaviour"]}
    report = upgrade_report.build(golden, now)
    assert len(report["changes"]) == len(golden["behaviour"])
    full, summary = upgrade_report.render_markdown(report), upgrade_report.render_summary(report)
    assert len(full) > upgrade_report.SUMMARY_LIMIT > len(summary)
    assert f"**{len(golden['behaviour'])} of" in summary and "more" in summary
    # a tighter limit leaves whole families out, and says so, rather than outgrow it
    tight = upgrade_report.render_summary(report, limit=10_000)
    assert len(tight) < 10_000 and "more families left out to stay under 10,000 characters" in tight


def test_a_text_is_written_once_per_family_table_and_deviations_are_explained(golden):
    now = copy.deepcopy(golden)
    for key in [k for k in golden["behaviour"] if k.startswith("native.scalar.")][:5]:
        now["behaviour"][key] = "e4m3fn=exact"
    now["behaviour"]["transformers.fp8.backward.float.f32"] = "deviates: backward_scale_in_grad_dtype"
    md = upgrade_report.render_markdown(upgrade_report.build(golden, now))
    scalar_rows = [line for line in md.splitlines() if line.startswith("| ") and "native.scalar." in line]
    assert len(scalar_rows) == 5 and all(line.endswith("see (1) |") for line in scalar_rows), scalar_rows
    assert sum(line.startswith("(1) ") for line in md.splitlines()) == 1
    assert "- `backward_scale_in_grad_dtype`: medium: a LoRA step's input gradient" in md


def _accept_setup(golden: dict, tmp_path: Path) -> tuple[str, str]:
    mine, now_path = tmp_path / "stack.json", tmp_path / "now.json"
    save(golden, mine)
    now = copy.deepcopy(golden)
    now["behaviour"].update({"cast.e4m3fn.bf16.overflow": "nonsaturate", "finfo.e4m3fn.max": 240.0})
    save(now, now_path)
    return str(mine), str(now_path)


def test_accept_takes_some_keys_and_the_rest_keep_failing(golden, tmp_path, capsys):
    mine, now = _accept_setup(golden, tmp_path)
    assert main(["accept", mine, now, "--key", "cast.*.overflow", "--why", "we clip first"]) == 0
    status, lines = compare_with_golden(mine, "cpu", now=load(now))
    assert status == "differs" and len(lines) == 1 and lines[0].startswith("finfo.e4m3fn.max")
    capsys.readouterr()
    assert main(["diff", mine, now]) == 1
    text = capsys.readouterr().out
    assert "'saturate' -> 'nonsaturate'  (accepted)" in text and "448.0 -> 240.0\n" in text
    assert main(["diff", mine, now, "--accepted-ok"]) == 1  # one difference is not accepted
    assert main(["accept", mine, now, "--key", "nothing.*", "--why", "x"]) == 2
    assert "matches none" in capsys.readouterr().err


def test_accepted_ok_exits_0_when_every_difference_is_accepted(golden, tmp_path, capsys):
    mine, now = _accept_setup(golden, tmp_path)
    assert main(["accept", mine, now, "--why", "both on purpose"]) == 0
    assert main(["diff", mine, now]) == 1 and main(["diff", mine, now, "--accepted-ok"]) == 0
    assert main(["diff", mine, now, "--accepted-ok", "--format", "summary"]) == 0


def test_accepting_a_profile_drops_accepted_differences_that_are_gone(golden, tmp_path, capsys):
    """A difference accepted, then gone (the change reverted): the golden test fails on the named
    one that is gone, and the accept command it prints must clear it, not say nothing to accept."""
    mine, now = _accept_setup(golden, tmp_path)
    assert main(["accept", mine, now, "--why", "both on purpose"]) == 0
    reverted = load(now)
    reverted["behaviour"]["finfo.e4m3fn.max"] = golden["behaviour"]["finfo.e4m3fn.max"]
    save(reverted, now)
    assert compare_with_golden(mine, "cpu", now=load(now))[0] == "differs"  # (a named one is gone)
    capsys.readouterr()
    assert main(["accept", mine, now, "--why", "both on purpose"]) == 0
    assert "1 no longer differing, dropped: finfo.e4m3fn.max" in capsys.readouterr().out
    assert compare_with_golden(mine, "cpu", now=load(now))[0] == "named"
    (entry,) = json.loads((tmp_path / "stack-installs.json").read_text()).values()
    assert list(entry["differences"]) == ["cast.e4m3fn.bf16.overflow"] and list(entry["reasons"]) == list(
        entry["differences"]
    )
    save(golden, now)  # (everything reverted: nothing left to name, the file goes)
    assert compare_with_golden(mine, "cpu", now=load(now))[0] == "differs"
    assert main(["accept", mine, now, "--why", "both on purpose"]) == 0
    assert not (tmp_path / "stack-installs.json").exists(), capsys.readouterr().out
    assert compare_with_golden(mine, "cpu", now=load(now))[0] == "equal"


def test_a_re_pin_drops_this_installs_accepted_differences_and_keeps_the_others(golden, tmp_path):
    """Re-pinned on this install, the golden holds its values: the differences accepted for it would
    each be a named one that is gone (a failure), so its entry goes; another install's stays."""
    mine, now = _accept_setup(golden, tmp_path)
    assert main(["accept", mine, now, "--why", "both on purpose"]) == 0
    named_path = tmp_path / "stack-installs.json"
    other = {"torch 9.9.9, torchao 9.9.9": {"why": "theirs", "differences": {"finfo.e4m3fn.max": 1.0}}}
    named_path.write_text(json.dumps({**json.loads(named_path.read_text()), **other}))
    status, lines = compare_with_golden(mine, "cpu", update=True, now=load(now))
    assert status == "updated" and any("dropped from" in line and "2 difference(s)" in line for line in lines), lines
    assert json.loads(named_path.read_text()) == other
    assert compare_with_golden(mine, "cpu", now=load(now))[0] == "equal"


def test_each_key_keeps_its_reason_and_replacing_one_asks(golden, tmp_path, capsys, monkeypatch):
    mine, now = _accept_setup(golden, tmp_path)
    assert main(["accept", mine, now, "--key", "cast.*", "--why", "first reason"]) == 0
    assert main(["accept", mine, now, "--key", "finfo.*", "--why", "second reason"]) == 0  # (other keys)
    (entry,) = json.loads((tmp_path / "stack-installs.json").read_text()).values()
    assert entry["reasons"] == {"cast.e4m3fn.bf16.overflow": "first reason", "finfo.e4m3fn.max": "second reason"}
    assert entry["why"] == "first reason | second reason" and len(entry["differences"]) == 2
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["accept", mine, now, "--key", "cast.*", "--why", "third reason"]) == 2
    assert "first reason" in capsys.readouterr().err
    (unchanged,) = json.loads((tmp_path / "stack-installs.json").read_text()).values()
    assert unchanged == entry
    assert main(["accept", mine, now, "--key", "cast.*", "--why", "third reason", "--replace"]) == 0
    (entry,) = json.loads((tmp_path / "stack-installs.json").read_text()).values()
    assert entry["reasons"]["cast.e4m3fn.bf16.overflow"] == "third reason"


@pytest.mark.parametrize(
    "versions,words",
    [
        (None, "versions"),
        ({"torch": 2.13}, "versions"),
        ({"torch": "2.13.0", "torchao": ["0.18.0"]}, "versions torchao"),
        ({"torch": "2.13.0", "device": ""}, "versions device"),
        ({"torch": "2.13.0"}, "versions device"),
    ],
)
def test_a_hand_edited_profile_is_a_usage_error_in_every_command(golden, tmp_path, capsys, versions, words):
    bad = copy.deepcopy(golden)
    if versions is None:
        del bad["versions"]
    else:
        bad["versions"] = versions
    save(bad, tmp_path / "bad.json")
    for argv in (
        ["diff", str(GOLDEN / "cpu.json"), str(tmp_path / "bad.json")],
        ["diff", str(tmp_path / "bad.json"), str(GOLDEN / "cpu.json"), "--format", "json"],
        ["accept", str(GOLDEN / "cpu.json"), str(tmp_path / "bad.json"), "--why", "x"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and "Traceback" not in err, err
