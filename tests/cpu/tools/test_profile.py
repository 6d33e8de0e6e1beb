"""The behaviour profile: its diff lines, the golden comparison's failure path, the CLI round trip."""

import copy
import json

import pytest

from fp8ref.__main__ import main
from fp8ref.harness.profiles.golden import compare_with_golden
from fp8ref.harness.profiles.profile_file import TOLERANCES, ProfileError, diff, format_diff, load, save
from fp8ref.harness.stack.install import device_kind
from fp8ref.harness.stack.refusals import NOT_MEASURED
from tests.gpu.test_golden_profile import HOW_TO_PIN as GPU_PIN


def _p(torch_v, **behaviour):
    return {
        "fp8ref_profile": 1,
        "versions": {"torch": torch_v, "torchao": "0.18.0", "device": "cpu"},
        "behaviour": behaviour,
    }


def test_format_diff_is_one_line_per_key():
    pinned = _p("2.13.0", **{"cast.e4m3fn.bf16.overflow": "saturate", "same": 1, "gone": 2})
    now = _p("2.9.1", **{"cast.e4m3fn.bf16.overflow": "nonsaturate", "same": 1, "new": 3})
    assert format_diff(pinned, now) == [
        "cast.e4m3fn.bf16.overflow: pinned 'saturate' (torch 2.13.0, torchao 0.18.0) "
        "-> now 'nonsaturate' (torch 2.9.1, torchao 0.18.0)",
        "gone: pinned 2 (torch 2.13.0, torchao 0.18.0) -> now '<absent>' (torch 2.9.1, torchao 0.18.0)",
        "new: pinned '<absent>' (torch 2.13.0, torchao 0.18.0) -> now 3 (torch 2.9.1, torchao 0.18.0)",
    ]
    assert diff(pinned, pinned) == []


@pytest.fixture
def here(cpu_profile):
    """This install's profile (a copy of the run's one collection): the tools below are tested
    against profiles they build from it, never against the pinned golden (which this install may
    legitimately differ from)."""
    return copy.deepcopy(cpu_profile)


def test_a_changed_golden_fails_with_readable_lines(tmp_path, here):
    golden = copy.deepcopy(here)
    key = "cast.e4m3fn.bf16.overflow"
    flipped = "nonsaturate" if here["behaviour"][key] == "saturate" else "saturate"
    golden["behaviour"][key] = flipped
    golden["versions"].update(torch="9.9.9", torchao="0.0.1")
    save(golden, tmp_path / "cpu.json")
    status, lines = compare_with_golden(tmp_path, "cpu", now=here)
    assert status == "differs"
    v = here["versions"]
    assert lines == [
        f"{key}: pinned {flipped!r} (torch 9.9.9, torchao 0.0.1) "
        f"-> now {here['behaviour'][key]!r} (torch {v['torch']}, torchao {v['torchao'] or 'not installed'})"
    ]
    assert compare_with_golden(tmp_path, "cpu", now=golden) == ("equal", [])


def test_compare_with_golden_collects_this_install_when_not_given_a_profile(tmp_path, here, monkeypatch):
    import fp8ref.harness.profiles.profile

    seen = []
    monkeypatch.setattr(fp8ref.harness.profiles.profile, "collect", lambda *a, **k: seen.append(a) or here)
    save(here, tmp_path / "cpu.json")
    assert compare_with_golden(tmp_path, "cpu") == ("equal", [])
    assert seen == [("cpu",)]


def test_the_profile_command_collects_the_same_answers_again_and_prints_nothing_on_stderr(tmp_path, here, capfd):
    """``python -m fp8ref profile --out`` through ``main`` in this interpreter, collecting for
    real: exit 0, "wrote" on stdout alone and nothing on the file descriptor 2 (torch.profiler's
    kineto writes there from C++ unless ``gemm_probes.kernels_of`` quiets it), no warning but
    the ones a fresh interpreter hides (deprecations), and the same answers as the run's own
    collection: two collections on one install are identical, not merely within TOLERANCES. (The
    same command in a fresh interpreter, its imports' output too: the slow
    ``test_cli_exit_codes.py::test_a_profile_in_a_fresh_interpreter_prints_nothing_on_stderr``.)"""
    import warnings

    from tests.cpu.tools.test_cli_exit_codes import stray_stderr

    out = tmp_path / "now.json"
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", hidden)  # (what a fresh interpreter's filters hide)
        code = main(["profile", "--out", str(out)])
    got = capfd.readouterr()
    assert code == 0, got.err[-2000:]
    stray = stray_stderr(got.err)
    assert stray == "", f"stray lines on stderr: {stray[:2000]!r}"
    assert got.out.startswith("wrote ") and got.out.count("\n") == 1, got.out
    assert [str(w.message) for w in caught] == []
    assert _measured(load(out))["behaviour"] == _measured(here)["behaviour"]


def test_missing_golden_says_how_to_pin(tmp_path, here):
    status, lines = compare_with_golden(tmp_path, "cpu", now=here)
    assert status == "missing" and f"python -m fp8ref profile --device cpu --out {tmp_path / 'cpu.json'}" in lines[0]
    status, lines = compare_with_golden(tmp_path, "cpu", now=here, how_to_pin="pytest THAT --fp8-update-golden")
    assert status == "missing" and "`pytest THAT --fp8-update-golden`" in lines[0]


def test_a_missing_golden_is_found_before_collecting(tmp_path, monkeypatch):
    """On a GPU runner collecting takes tens of seconds: a missing golden says so at once, and
    names the test that pins only this device kind's file (not the CPU golden too)."""
    import fp8ref.harness.profiles.golden
    import fp8ref.harness.profiles.profile

    monkeypatch.setattr(fp8ref.harness.profiles.profile, "collect", lambda *a, **k: pytest.fail("collected"))
    monkeypatch.setattr(fp8ref.harness.profiles.golden, "device_kind", lambda device: "cuda-sm90")
    status, lines = compare_with_golden(tmp_path, "cuda", how_to_pin=GPU_PIN)
    assert status == "missing" and "cuda-sm90" in lines[0]
    assert f"`{GPU_PIN}`" in lines[0]


def _measured(profile: dict) -> dict:
    """``profile`` without the keys this install could not measure (fp8ref's own package missing:
    a golden is not pinned with them; the minimal install's profile holds some)."""
    out = copy.deepcopy(profile)
    out["behaviour"] = {
        k: v for k, v in out["behaviour"].items() if not (isinstance(v, str) and v.startswith(NOT_MEASURED))
    }
    return out


def test_update_writes_the_golden(tmp_path, here):
    here = _measured(here)
    status, lines = compare_with_golden(tmp_path, "cpu", update=True, now=here)
    assert status == "updated" and "commit it" in lines[0]
    assert load(tmp_path / "cpu.json") == here


def test_order_dependent_numbers_compare_within_their_tolerance():
    key = "emulated_mlp.loss.step299"
    assert key.startswith(tuple(TOLERANCES))
    tol = next(t for prefix, t in TOLERANCES.items() if key.startswith(prefix))
    a = _p("2.13.0", **{key: 0.0240})
    assert diff(a, _p("2.13.0", **{key: 0.0240 * (1 + tol / 2)})) == []
    assert diff(a, _p("2.13.0", **{key: 0.0240 * (1 + 2 * tol)})) != []
    # exact keys stay exact, and a refusal is never "close" to a number
    assert diff(_p("x", **{"finfo.e5m2.eps": 0.25}), _p("x", **{"finfo.e5m2.eps": 0.2500001})) != []
    assert diff(a, _p("2.13.0", **{key: "refused: RuntimeError: no"})) != []


def test_cli_profile_round_trips(tmp_path, capsys, here, monkeypatch):
    """profile --out writes what collect returned (the run's collection stands in: the golden
    test and the profile command's test above collect for real), and diff reads it back."""
    import fp8ref.harness.profiles.profile

    calls = []
    monkeypatch.setattr(fp8ref.harness.profiles.profile, "collect", lambda *a, **k: calls.append((a, k)) or here)
    out = tmp_path / "now.json"
    assert main(["profile", "--out", str(out)]) == 0
    assert calls == [(("cpu",), {"torchao": True, "claims": ()})] and load(out) == here
    assert main(["diff", str(out), str(out)]) == 0
    assert "equal" in capsys.readouterr().out
    changed = load(out)
    changed["behaviour"]["finfo.e5m2fnuz.eps"] = 0.5
    save(changed, tmp_path / "b.json")
    assert main(["diff", str(out), str(tmp_path / "b.json")]) == 1
    assert "finfo.e5m2fnuz.eps" in capsys.readouterr().out


def test_cli_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["profile", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--device" in out and "--out" in out and "--no-torchao" in out and "--claims" in out


def test_bad_profile_and_device_are_rejected(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not an fp8ref profile"):
        load(tmp_path / "x.json")
    with pytest.raises(ValueError, match="device: expected 'cpu' or 'cuda"):
        device_kind("mps")


@pytest.mark.parametrize("content", ['{"fp8ref_profile": 1, "behav', "", "[]"], ids=["truncated", "empty", "list"])
def test_a_corrupted_golden_names_the_file_and_how_to_re_pin(tmp_path, content):
    path = tmp_path / "cpu.json"
    path.write_text(content)
    now = {"fp8ref_profile": 1, "versions": {}, "behaviour": {}}
    status, lines = compare_with_golden(tmp_path, "cpu", now=now, how_to_pin="pytest THAT --fp8-update-golden")
    assert status == "unreadable"
    assert str(path) in lines[0] and "`pytest THAT --fp8-update-golden`" in lines[1]


def test_a_first_run_pins_then_collects_again_and_compares(tmp_path, here):
    """With no golden for a device kind, pin_first pins to the run's folder and a second
    collection must match: a deterministic profile is "pinned", one that changes is caught."""
    from fp8ref.harness.profiles.golden import pin_first

    here = _measured(here)
    status, lines = pin_first(tmp_path / "out", "cpu", collect=lambda device: copy.deepcopy(here))
    assert status == "pinned" and (tmp_path / "out" / "cpu.json").is_file() and "tests/golden/cpu.json" in lines[0]
    calls = iter([0.5, 0.25])

    def drifting(device):
        now = copy.deepcopy(here)
        now["behaviour"]["finfo.e5m2fnuz.eps"] = next(calls)
        return now

    status, lines = pin_first(tmp_path / "again", "cpu", collect=drifting)
    assert status == "differs" and any("finfo.e5m2fnuz.eps" in line for line in lines)


def _named(tmp_path, label, differences, why="a known change"):
    (tmp_path / "cpu-installs.json").write_text(json.dumps({label: {"why": why, "differences": differences}}))


def test_an_install_may_differ_in_exactly_its_named_keys(tmp_path):
    pinned = _p("2.13.0", a="saturate", b=1, c="x")
    now = _p("2.9.1+cu128", a="nonsaturate", b=1, c="y")
    save(pinned, tmp_path / "cpu.json")
    _named(tmp_path, "torch 2.9.1, torchao 0.18.0", {"a": "nonsaturate", "c": "y"})
    assert compare_with_golden(tmp_path, "cpu", now=now) == ("named", [])
    # a value other than the named one, an unnamed key, a named key that no longer differs
    for changed, word in ((dict(a="other"), "a: pinned"), (dict(b=2), "b: pinned"), (dict(c="x"), "c: named as")):
        status, lines = compare_with_golden(tmp_path, "cpu", now=_p("2.9.1", **{**now["behaviour"], **changed}))
        assert status == "differs" and any(line.startswith(word) for line in lines), (changed, lines)
    # another install is held to the golden alone
    status, lines = compare_with_golden(tmp_path, "cpu", now=_p("2.10.0", **now["behaviour"]))
    assert status == "differs" and len(lines) == 2


def test_a_named_entry_without_a_reason_is_refused(tmp_path):
    save(_p("2.13.0", a=1), tmp_path / "cpu.json")
    _named(tmp_path, "torch 2.9.1, torchao 0.18.0", {"a": 2}, why="")
    with pytest.raises(ProfileError, match="needs 'why'"):
        compare_with_golden(tmp_path, "cpu", now=_p("2.9.1", a=2))


def _cpu(amx, kernels):
    p = _p("2.13.0", **{"scaled_mm.kernels.tensorwise": kernels, "finfo.e4m3fn.max": 448.0})
    p["versions"].update(device="cpu", cpu_amx=amx)
    return p


def test_the_cpu_kernel_keys_compare_only_between_machines_that_agree_on_amx():
    """torch's CPU tensorwise _scaled_mm runs oneDNN where torch finds AMX usable and a float32
    matmul where not: that key is a fact of the machine too, left out of a diff between machines
    that disagree, compared between machines that agree, and a refusal is compared always."""
    onednn, emulated = "aten::_scaled_mm", "aten::_scaled_mm > aten::mm"
    assert diff(_cpu("no", emulated), _cpu("yes", onednn)) == []
    assert diff(_cpu("yes", emulated), _cpu("yes", onednn)) == [("scaled_mm.kernels.tensorwise", emulated, onednn)]
    refused = "refused: RuntimeError: no"
    assert diff(_cpu("no", emulated), _cpu("yes", refused)) == [("scaled_mm.kernels.tensorwise", emulated, refused)]
    older = _cpu("yes", onednn)
    del older["versions"]["cpu_amx"]  # a profile from before the field: compared as ever
    assert len(diff(_cpu("no", emulated), older)) == 1
