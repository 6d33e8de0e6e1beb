"""``python -m fp8ref``: the format table and the codec benchmark run and say what they should."""

import json
from pathlib import Path

import pytest

from fp8ref.__main__ import main
from fp8ref.harness.speed.bench import best_time, codec_throughput
from fp8ref.reference.formats import FORMATS
from tests.common.beside import fp8ref_main_each, main_each_report
from tests.common.paths import GOLDEN

_GOLDEN = str(GOLDEN / "cpu.json")
_TRAINING = ("fp8ref.finetune.", "transformers", "torchao")


def run_beside(folder):
    """Fresh interpreters, run beside the tests (tests/plugins/beside.py): ``formats`` with --verbose,
    then plain (what they imported, how each left the loggers); ``diff`` and ``--help`` (whether
    they imported torch)."""
    return {
        "formats": fp8ref_main_each({"verbose": ["--verbose", "formats"], "plain": ["formats"]}),
        "diff": fp8ref_main_each({"diff": ["diff", _GOLDEN, _GOLDEN]}),
        "diff report": fp8ref_main_each({"report": ["diff", _GOLDEN, _changed(folder), "--format", "markdown"]}),
        "help": fp8ref_main_each({"help": ["--help"]}),
    }


def _changed(folder: Path) -> str:
    """fp8ref's CPU golden with one key changed: its report reads every family's meanings."""
    profile = json.loads(open(_GOLDEN).read())
    profile["behaviour"]["cast.e4m3fn.bf16.overflow"] = "something else"
    path = folder / "changed.json"
    path.write_text(json.dumps(profile))
    return str(path)


@pytest.fixture
def fresh(beside):
    """``fresh(process)``: its report (tests/common/beside.py), every call in it having exited 0."""

    def report(name: str) -> dict:
        out = main_each_report(beside(name))
        for call, (code, err, _) in out["calls"].items():
            assert code == 0, f"{call}: {err}"
        return out

    return report


def test_formats_table_lists_every_format(capsys):
    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    for name, fmt in FORMATS.items():
        line = next(row for row in out.splitlines() if row.startswith(name + " "))
        assert repr(fmt.max) in line


def test_formats_json_round_trips(capsys):
    assert main(["formats", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(FORMATS)
    assert rows[0] == FORMATS["e4m3fn"].describe()


def test_bench_codec_reports_a_ratio_per_format(capsys):
    assert main(["bench", "codec", "--n", "4096", "--repeat", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["format"] for r in rows} == {"e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"}
    for r in rows:
        assert r["ratio"] == pytest.approx(r["native_s"] / r["codec_s"])


def test_help_lists_the_commands_and_an_unknown_one_is_a_usage_error(capsys):
    """(``python -m fp8ref`` as a process, exit codes included: test_cli_exit_codes.py.)"""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "formats" in out and "bench" in out and "finetune" in out
    with pytest.raises(SystemExit) as done:
        main(["nope"])
    assert done.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: codec_throughput(n=0), "n: expected a positive int"),
        (lambda: best_time(lambda: None, repeat=0), "repeat: expected a positive int"),
    ],
)
def test_bench_rejects_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_peak_table_matches_exact_device_models_only():
    from fp8ref.harness.speed.bench import gemm_tflops, peak_tflops

    assert peak_tflops("NVIDIA H100 PCIe")["bf16"] == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3") == {"bf16": 989.0, "fp8": 1979.0}
    assert peak_tflops("NVIDIA H200")["fp8"] == 1979.0 and peak_tflops("NVIDIA B200")["fp8"] == 4500.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB") is None
    # other models that share a substring with a known one get no peak, not the wrong one
    for other in ("NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GB200", "NVIDIA H100"):
        assert peak_tflops(other) is None, other
    assert gemm_tflops(1000, 1000, 1000, 1e-3) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="seconds"):
        gemm_tflops(1, 1, 1, 0.0)


def test_scaled_mm_vs_bf16_reports_both_and_their_ratio_on_cpu():
    from fp8ref.harness.speed.bench import scaled_mm_vs_bf16

    row = scaled_mm_vs_bf16(32, 64, 48, device="cpu", repeat=1)
    assert row["fp8_over_bf16"] == pytest.approx(row["fp8_tflops"] / row["bf16_tflops"])
    assert row["device_name"] == "cpu" and "fp8_pct_peak" not in row and row["peak"] == "no peak known for cpu"


def test_building_the_parser_loads_no_training_code(fresh):
    """``formats`` and ``diff`` must not pay for (or break with) the fine-tune application."""
    assert [m for m in fresh("formats")["modules"] if m.startswith(_TRAINING)] == ["fp8ref.finetune.presets"]


def test_diff_and_help_do_not_import_torch(fresh, beside):
    """Comparing two installs' profiles reads JSON only: it starts in a fraction of a second (and
    works where torch cannot be imported at all)."""
    assert "torch" not in fresh("diff")["modules"]
    assert "torch" not in fresh("help")["modules"]
    report = main_each_report(beside("diff report"))  # (a difference: every family's meanings read)
    assert report["calls"]["report"][0] == 1 and "torch" not in report["modules"], report["calls"]


def test_import_noise_is_shown_only_with_verbose(fresh):
    """torchao logs, while importing, the optional kernels it cannot load; the CLI quiets the
    loggers that print then, unless --verbose asks for them."""
    calls = fresh("formats")["calls"]
    assert calls["verbose"][2] == [0] * len(calls["verbose"][2])  # untouched
    assert calls["plain"][2] == [40] * len(calls["plain"][2]) and len(calls["plain"][2]) == 3  # logging.ERROR


def test_a_bug_during_training_is_not_reported_as_bad_input(monkeypatch, capsys):
    """A bad option exits 2 with one line; a ValueError raised while training is a bug: exit 3
    with its traceback."""
    from fp8ref.finetune import train

    def broken(cfg, progress=None):
        raise ValueError("a bug inside the training loop")

    monkeypatch.setattr(train, "compare", broken)
    assert main(["finetune", "--no-progress", "--no-plot"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "a bug inside the training loop" in err


def test_a_bad_finetune_option_is_one_line_and_exit_2(capsys):
    assert main(["finetune", "--steps", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: steps") and "Traceback" not in err
