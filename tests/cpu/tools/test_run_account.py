"""What the end of a run says about what it did not check and what it excused: skips counted by
why (tests/plugins/skip_account.py), the install's known wrong answers first, each with its
severity (fp8ref/harness/casts/defects.py), and ``--fp8-strict`` failing the run on any."""

from types import SimpleNamespace

import pytest

from fp8ref.harness.casts import defects
from fp8ref.harness.stack import install
from tests.plugins import skip_account, summaries


def _skip(reason: str) -> SimpleNamespace:
    return SimpleNamespace(longrepr=("tests/plugins/fixtures.py", 28, f"Skipped: {reason}"))


REASONS = {
    f"{install.versions_line()} cannot do torch._grouped_mm on cpu: refused: NotImplementedError: x": (
        "refused by the install"
    ),
    f"{install.versions_line()} cannot do casts to e8m0fnu: missing: torch 2.6 has no float8_e8m0fnu": (
        "refused by the install"
    ),
    install.needs_package("transformers", "this test"): "package not installed or not importable",
    f"{install.versions_line()} cannot import torchao.float8: refused: ImportError: x": (
        "package not installed or not importable"
    ),
    "slow: run with --fp8-slow": "slow tier (--fp8-slow, --fp8-gpu-long)",
    "gpu_long: minutes on a GPU; run with --fp8-gpu-long": "slow tier (--fp8-slow, --fp8-gpu-long)",
    "needs a CUDA GPU (torch.cuda.is_available() is False); --fp8-dry-run runs this test on the CPU instead": (
        "needs a GPU"
    ),
    "needs sm90+ (rowwise); this device: NVIDIA A100 (sm80)": "needs a GPU",
    "the catalogue has no torch._scaled_mm": "other",
    "no golden profile for device kind 'cpu' (/x/cpu.json); pin this one alone": (
        "golden not compared (none to compare with, or pinned by this run)"
    ),
    "pinned /x/cpu.json on torch 2.13.0, torchao 0.18.0; commit it and say why in the message": (
        "golden not compared (none to compare with, or pinned by this run)"
    ),
}


@pytest.mark.parametrize("reason", list(REASONS))
def test_each_skip_reason_has_its_kind(reason):
    assert skip_account.kind_of(reason) == REASONS[reason]


def test_the_account_counts_each_kind_and_names_what_was_refused():
    lines = skip_account.account([_skip(r) for r in REASONS] + [_skip("slow: run with --fp8-slow")])
    assert "refused by the install: 2" in lines and "slow tier (--fp8-slow, --fp8-gpu-long): 3" in lines
    assert "  torch._grouped_mm on cpu" in lines and "  casts to e8m0fnu" in lines
    assert "other: 1" in lines and "  the catalogue has no torch._scaled_mm" in lines
    assert skip_account.account([]) == []


def test_every_named_deviation_has_a_severity_and_a_consequence():
    for key in defects.every_deviation():
        severity, consequence = defects.severity_of(key)
        assert severity in defects.SEVERITIES and len(consequence) > 30, key
    for key in defects.KNOWN_FAILURES:
        assert defects.severity_of(key)[0] in defects.SEVERITIES, key
    with pytest.raises(KeyError, match="names no deviation"):
        defects.defect("no_such_deviation", "here", 1)


def _session(strict: bool, found: list[dict]) -> SimpleNamespace:
    stash = {summaries._DEFECT_KEY: found, summaries._REPORTS_KEY: []}
    config = SimpleNamespace(
        stash=stash, getoption=lambda name, default=None: strict if name == "--fp8-strict" else default
    )
    return SimpleNamespace(config=config, exitstatus=pytest.ExitCode.OK)


def test_strict_fails_a_green_run_that_met_a_known_wrong_answer():
    from dataclasses import asdict

    found = [asdict(defects.defect("loader_blocks_from_grid", "transformers Fp8Dequantize", 3))]
    for strict, found_here, status in ((True, found, 1), (False, found, 0), (True, [], 0)):
        session = _session(strict, found_here)
        summaries.pytest_sessionfinish(session)
        assert session.exitstatus == status, (strict, found_here)


def test_the_defects_section_opens_with_the_most_severe():
    from dataclasses import asdict

    found = [asdict(defects.defect(k, "x", 1)) for k in ("abs_keeps_negative_zero", "loader_blocks_from_grid")]
    session = _session(False, found)
    ordered = summaries.defects(session.config)
    assert [d["severity"] for d in ordered] == ["high", "low"]
    lines = summaries.defect_lines(ordered, strict=False)
    assert lines[1].startswith("[high] loader_blocks_from_grid: x, 1 excused") and "--fp8-strict" in lines[0]


def test_the_report_file_says_the_defects_before_the_golden(tmp_path):
    path = tmp_path / "report.md"
    sections = [("FP8 behaviour observed on this install", ["a: 1"]), (summaries.DEFECTS_TITLE, ["[high] k: x"])]
    summaries.write_run_report(str(path), [], sections, 0)
    text = path.read_text()
    assert text.index(summaries.DEFECTS_TITLE) < text.index("No golden test ran") < text.index("a: 1")


def test_a_summary_report_stays_under_a_pull_request_comment(tmp_path):
    from fp8ref.harness.profiles import upgrade_report

    path = tmp_path / "report.md"
    sections = [
        (summaries.DEFECTS_TITLE, ["[high] k: x"]),
        ("FP8 behaviour observed on this install", [f"key {i}: " + "v" * 200 for i in range(2_000)]),
        (summaries.SKIPS_TITLE, ["slow tier (--fp8-slow, --fp8-gpu-long): 3"]),
    ]
    summaries.write_run_report(str(path), [], sections, 0, summary=True)
    text = path.read_text()
    assert len(text) < upgrade_report.SUMMARY_LIMIT and summaries.SKIPS_TITLE in text and "key 1:" not in text
    summaries.write_run_report(str(path), [], sections, 0)
    assert len(path.read_text()) > upgrade_report.SUMMARY_LIMIT  # (the full one keeps everything)
    # a section that alone outgrows the limit is cut at a line, its code block closed
    huge = [(summaries.DEFECTS_TITLE, ["[high] k: x"]), (summaries.SKIPS_TITLE, ["y" * 100] * 1_000)]
    summaries.write_run_report(str(path), [], huge, 0, summary=True)
    text = path.read_text()
    assert len(text) < upgrade_report.SUMMARY_LIMIT and text.count("```") % 2 == 0 and "cut here" in text
