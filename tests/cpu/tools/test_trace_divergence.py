"""Where two pinned runs of one program first part (``fp8ref.harness.trace.divergence``), and the
profile's diff and upgrade report that carry it (``profile_file.first_divergence``): made-up
trace lines, so each case says exactly which call changed and how. A real fault located this way
is tests/meta/test_workload_faults.py."""

from __future__ import annotations

import pytest

from fp8ref.harness.profiles.profile_file import diff_line, first_divergence
from fp8ref.harness.profiles.upgrade_report import build, render_markdown, render_summary
from fp8ref.harness.trace.divergence import first_divergence as first
from fp8ref.harness.trace.divergence import parse

pytestmark = pytest.mark.cpu

X, W = "bfloat16[4,8](8,1)#aaaa", "bfloat16[8,8](8,1)#bbbb"
CAST_X = f"aten._to_copy.default cast | {X} | float8_e4m3fn[4,8](8,1)#c0de | step.py:10"
CAST_W = f"aten._to_copy.default cast | {W} | float8_e4m3fn[8,8](8,1)#d00d | step.py:11"
A, B = "float8_e4m3fn[4,8](8,1)#c0de", "float8_e4m3fn[8,8](1,8)#d00d"
MM = f"aten._scaled_mm.default scaled_mm | {A} {B} | bfloat16[4,8](8,1)#eeee | step.py:12"
RUN = [CAST_X, CAST_W, MM]


def _changed(line: str, old: str, new: str) -> str:
    assert old in line
    return line.replace(old, new)


def test_the_same_run_does_not_part_even_when_its_lines_moved():
    assert first(RUN, RUN) is None
    assert first(RUN, [_changed(CAST_X, "step.py:10", "step.py:14"), CAST_W, MM]) is None


def test_an_output_changed_on_the_same_inputs_names_that_call_and_its_line():
    now = [CAST_X, _changed(CAST_W, "#d00d", "#dead"), _changed(MM, "#d00d", "#dead").replace("#eeee", "#ffff")]
    said = first(RUN, now)
    assert said is not None
    assert said.startswith("call #1 (the 2nd FP8 call) aten._to_copy.default (cast) at step.py:11: its output")
    assert "inputs with the same bytes" in said


def test_inputs_that_changed_first_blame_an_op_the_trace_does_not_record():
    now = [_changed(CAST_X, X, X.replace("#aaaa", "#abab")).replace("#c0de", "#c1de"), CAST_W, MM]
    said = first(RUN, now)
    assert said is not None and said.startswith("call #0 (the 1st FP8 call) aten._to_copy.default")
    assert "so did its inputs" in said and "does not record" in said


def test_another_op_or_another_layout_is_another_path():
    transposed = _changed(CAST_W, "(8,1)#bbbb", "(1,8)#bbbb")
    said = first(RUN, [CAST_X, transposed, MM])
    assert said is not None and said.startswith("call #1 (the 2nd FP8 call): the program took another path")
    assert first(RUN, RUN[:2]) == "the first 2 calls agree; pinned 3 calls, now 2"


def test_which_output_of_several_changed_is_named():
    halves = "float8_e4m3fn[4,8](8,1)#2222 float8_e4m3fn[4,8](8,1)#3333"
    two = f"aten.split.Tensor movement | float8_e4m3fn[8,8](8,1)#1111 | {halves} | s.py:3"
    said = first([two], [two.replace("#3333", "#4444")])
    assert said is not None and "outputs 1 changed" in said


@pytest.mark.parametrize("bad", ["", "op | a | b", "op kind extra | - | - | s.py:1", 7])
def test_a_line_that_is_not_a_pinned_call_is_an_error_naming_it(bad):
    with pytest.raises(ValueError, match="not a pinned trace line"):
        parse(bad)


def _profile(value: str, lines: list[str] | None) -> dict:
    p = {"versions": {"torch": "2.13.0", "device": "cpu"}, "behaviour": {"workload.mine": value}}
    return p | ({"traces": {"workload.mine": lines}} if lines is not None else {})


def test_the_diff_line_and_the_upgrade_report_carry_the_first_divergence():
    now = [CAST_X, _changed(CAST_W, "#d00d", "#dead"), MM]
    a, b = _profile("3 calls, digest 1", RUN), _profile("3 calls, digest 2", now)
    line = diff_line("workload.mine", "3 calls, digest 1", "3 calls, digest 2", a, b)
    assert line.endswith("first divergence: " + first(RUN, now))
    (change,) = build(a, b)["changes"]
    assert change["divergence"] == first(RUN, now)
    report = build(a, b)
    markdown = render_markdown(report)
    assert "Where each traced program first diverges:" in markdown
    assert "- `workload.mine`: call #1 (the 2nd FP8 call) aten._to_copy.default (cast) at step.py:11" in markdown
    assert "first divergence: call #1" in render_summary(report)


def test_no_trace_on_either_side_means_no_divergence_and_a_broken_one_is_named():
    a, b = _profile("x", RUN), _profile("y", None)
    assert first_divergence("workload.mine", a, b) is None
    assert first_divergence("workload.other", a, a) is None
    broken = _profile("y", ["not a line"])
    said = first_divergence("workload.mine", a, broken)
    assert said is not None and said.startswith("cannot compare the traces: not a pinned trace line")


def test_a_call_site_is_kept_as_its_path_inside_its_package(tmp_path):
    from fp8ref.harness.trace.records import package_path

    pkg = tmp_path / "team" / "train"
    pkg.mkdir(parents=True)
    (tmp_path / "team" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    assert package_path(f"{pkg / 'step.py'}:12") == "team/train/step.py:12"
    assert package_path(f"{tmp_path / 'mystep.py'}:3") == "mystep.py:3"
    assert package_path("<string>:4") == "<string>:4"


def test_the_text_diff_prints_the_first_divergence_under_its_key(tmp_path, capsys):
    from fp8ref.__main__ import main
    from fp8ref.harness.profiles.profile_file import save

    now = [CAST_X, _changed(CAST_W, "#d00d", "#dead"), MM]
    a, b = _profile("3 calls, digest 1", RUN), _profile("3 calls, digest 2", now)
    for p in (a, b):
        p["fp8ref_profile"] = 1
    save(a, tmp_path / "a.json")
    save(b, tmp_path / "b.json")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    out = capsys.readouterr().out
    assert f"first divergence: {first(RUN, now)}" in out, out
