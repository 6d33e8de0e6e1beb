"""The behaviour profile: its diff lines, the golden comparison's failure path, the CLI round trip."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fp8ref.__main__ import main
from fp8ref.profile import compare_with_golden, device_kind, diff, format_diff, load, save, versions

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _p(torch_v, **behaviour):
    return {"fp8ref_profile": 1, "versions": {"torch": torch_v, "torchao": "0.18.0"}, "behaviour": behaviour}


def test_format_diff_is_one_line_per_key():
    pinned = _p("2.13.0", **{"cast.e4m3fn.bf16.overflow": "saturate", "same": 1, "gone": 2})
    now = _p("2.9.1", **{"cast.e4m3fn.bf16.overflow": "nonsaturate", "same": 1, "new": 3})
    assert format_diff(pinned, now) == [
        "cast.e4m3fn.bf16.overflow: pinned 'saturate' (torch 2.13.0, torchao 0.18.0) -> now 'nonsaturate' (torch 2.9.1, torchao 0.18.0)",
        "gone: pinned 2 (torch 2.13.0, torchao 0.18.0) -> now '<absent>' (torch 2.9.1, torchao 0.18.0)",
        "new: pinned '<absent>' (torch 2.13.0, torchao 0.18.0) -> now 3 (torch 2.9.1, torchao 0.18.0)",
    ]
    assert diff(pinned, pinned) == []


def test_a_changed_golden_fails_with_readable_lines(tmp_path):
    golden = load(GOLDEN / "cpu.json")
    golden["behaviour"]["cast.e4m3fn.bf16.overflow"] = "nonsaturate"
    golden["versions"]["torch"] = "9.9.9"
    save(golden, tmp_path / "cpu.json")
    status, lines = compare_with_golden(tmp_path, "cpu")
    assert status == "differs"
    here = versions("cpu")
    assert lines == [f"cast.e4m3fn.bf16.overflow: pinned 'nonsaturate' (torch 9.9.9, torchao {golden['versions']['torchao']}) "
                     f"-> now 'saturate' (torch {here['torch']}, torchao {here['torchao']})"]


def test_missing_golden_says_how_to_pin(tmp_path):
    status, lines = compare_with_golden(tmp_path, "cpu")
    assert status == "missing" and "--fp8-update-golden" in lines[0]


def test_cli_profile_round_trips_against_the_golden(tmp_path, capsys):
    out = tmp_path / "now.json"
    assert main(["profile", "--out", str(out)]) == 0
    assert main(["diff", str(GOLDEN / "cpu.json"), str(out)]) == 0
    assert "equal" in capsys.readouterr().out
    changed = load(out)
    changed["behaviour"]["finfo.e5m2fnuz.eps"] = 0.25
    save(changed, tmp_path / "b.json")
    assert main(["diff", str(out), str(tmp_path / "b.json")]) == 1
    assert "finfo.e5m2fnuz.eps" in capsys.readouterr().out


def test_cli_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "fp8ref", "profile", "--help"], capture_output=True, text=True, check=True)
    assert "--device" in out.stdout and "--out" in out.stdout


def test_bad_profile_and_device_are_rejected(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not an fp8ref profile"):
        load(tmp_path / "x.json")
    with pytest.raises(ValueError, match="device: expected 'cpu' or 'cuda"):
        device_kind("mps")
