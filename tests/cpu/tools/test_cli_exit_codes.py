"""The command line's contract: exit 0 when done, 1 only when a difference was found, 2 for every
usage or input error (one ``error:`` line, no traceback unless --debug), 3 for a bug; and no
half-written output when a command fails or is interrupted."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from fp8ref.__main__ import main
from fp8ref.harness.profiles import atomic
from fp8ref.harness.stack import install
from tests.common.beside import fp8ref_cli, pytest_each, pytest_each_result
from tests.common.paths import GOLDEN

GOLDEN_CPU = GOLDEN / "cpu.json"


@pytest.fixture
def files(tmp_path):
    return diff_inputs(tmp_path)


def diff_inputs(tmp_path: Path) -> dict[str, Path]:
    """Inputs a user may hand ``diff``, written into ``tmp_path``: a profile, one that differs,
    and the broken kinds."""
    good = json.loads(GOLDEN_CPU.read_text())
    other = json.loads(GOLDEN_CPU.read_text())
    other["behaviour"]["cast.e4m3fn.bf16.overflow"] = "something else"
    paths = {
        "good": tmp_path / "good.json",
        "other": tmp_path / "other.json",
        "missing": tmp_path / "missing.json",
        "not_json": tmp_path / "not.json",
        "truncated": tmp_path / "truncated.json",
        "not_profile": tmp_path / "list.json",
        "newer": tmp_path / "newer.json",
        "binary": tmp_path / "bin.json",
        "folder": tmp_path,
    }
    paths["good"].write_text(json.dumps(good))
    paths["other"].write_text(json.dumps(other))
    paths["not_json"].write_text("hello\n")
    paths["truncated"].write_text(GOLDEN_CPU.read_text()[:200])
    paths["not_profile"].write_text(json.dumps([1, 2, 3]))
    paths["newer"].write_text(json.dumps({**good, "fp8ref_profile": good["fp8ref_profile"] + 1}))
    paths["binary"].write_bytes(bytes(range(256)))
    return paths


USAGE_ERRORS = [
    (["diff", "{missing}", "{good}"], "cannot read it"),
    (["diff", "{good}", "{folder}"], "cannot read it"),
    (["diff", "{not_json}", "{good}"], "not JSON"),
    (["diff", "{good}", "{truncated}"], "truncated or corrupted"),
    (["diff", "{not_profile}", "{good}"], "not an fp8ref profile"),
    (["diff", "{good}", "{newer}"], "written by a newer fp8ref"),
    (["diff", "{binary}", "{good}"], "not a text file"),
    (["profile", "--device", "tpu"], "--device: expected 'cpu' or 'cuda[:N]'"),
    (["profile", "--device", "cuda:99"], "--device cuda:99"),
    (["bench", "codec", "--n", "0"], "--n and --repeat"),
    (["bench", "codec", "--device", "nope"], "--device: expected 'cpu' or 'cuda[:N]'"),
    (["finetune", "--steps", "0", "--no-progress"], "steps"),
    (["finetune", "--dataset", "{missing}", "--no-progress"], "dataset"),
]


@pytest.mark.parametrize(
    "argv,message", USAGE_ERRORS, ids=[" ".join(a[:2]) + f"-{i}" for i, (a, _) in enumerate(USAGE_ERRORS)]
)
def test_usage_and_input_errors_exit_2_with_one_error_line(argv, message, files, capsys):
    code = main([a.format(**files) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert "Traceback" not in err


def test_no_cuda_is_an_input_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["profile", "--device", "cuda"]) == 2
    assert capsys.readouterr().err.startswith("error: --device cuda: CUDA is not available here")


def test_diff_exits_0_for_equal_and_1_for_differing_profiles(files, capsys):
    assert main(["diff", str(files["good"]), str(files["good"])]) == 0
    assert main(["diff", str(files["good"]), str(files["other"])]) == 1
    assert "cast.e4m3fn.bf16.overflow" in capsys.readouterr().out


def test_debug_shows_the_traceback_and_keeps_the_exit_code(files, capsys):
    assert main(["--debug", "diff", str(files["missing"]), str(files["good"])]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


def test_a_bug_exits_3_with_its_traceback(monkeypatch, capsys):
    import fp8ref.harness.profiles.profile

    def broken(*a, **k):
        raise KeyError("a bug")

    monkeypatch.setattr(fp8ref.harness.profiles.profile, "collect", broken)
    assert main(["profile", "--no-torchao"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError" in err and "internal error" in err


def test_an_interrupted_profile_leaves_no_file(monkeypatch, tmp_path, capsys):
    import fp8ref.harness.profiles.profile

    out = tmp_path / "p.json"

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(fp8ref.harness.profiles.profile, "collect", interrupted)
    assert main(["profile", "--out", str(out)]) == 130
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_writer_that_fails_leaves_neither_a_partial_file_nor_a_temporary(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("the previous version\n")
    with pytest.raises(RuntimeError), atomic.replacing(target) as tmp:
        tmp.write_text('{"half": ')
        raise RuntimeError("the writer failed")
    assert target.read_text() == "the previous version\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    atomic.write_text(target, "new\n")
    assert target.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_written_file_takes_the_users_umask_like_any_new_file(tmp_path, umask):
    """The temporary file's 0600 must not survive the rename: outputs (profile JSON, fine-tune
    JSON and PNG) get the mode a plain ``open(path, "w")`` would give them."""
    import os
    import stat

    old = os.umask(umask)
    try:
        plain = tmp_path / "plain.json"
        plain.write_text("x")
        atomic.write_text(tmp_path / "atomic.json", "x")
    finally:
        os.umask(old)
    want = stat.S_IMODE(plain.stat().st_mode)
    assert want == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "atomic.json").stat().st_mode) == want


@pytest.mark.needs("matplotlib")
def test_a_plot_that_fails_to_save_leaves_no_png(monkeypatch, tmp_path):
    import matplotlib.figure

    from fp8ref.finetune.report import plot_losses

    def fail(self, fname, **kw):
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", fail)
    runs = {k: {"losses": [2.0, 1.5], "tokens_per_s": 1.0} for k in ("bf16", "fp8")}
    results = {
        "runs": runs,
        "config": {"backend": "fp8ref", "recipe": "tensorwise"},
        "data": {"loss_floor": None},
        "tail_gap": 0.0,
        "model": {"source": "tiny"},
        "speedup": 1.0,
        "tail_steps": 1,
        "parity": {"within": True, "gap": 0.0, "bound": 0.1, "noise": None, "budget": 0.1},
    }
    with pytest.raises(OSError, match="disk full"):
        plot_losses(results, tmp_path / "plot.png")
    assert list(tmp_path.iterdir()) == []


def run_beside(folder):
    """``python -m fp8ref`` as CI scripts call it, run beside the tests (tests/plugins/beside.py):
    the two diffs (no torch) as processes of their own, and a bad option in the interpreter the
    modules' pytest_each runs share. A whole profile in a fresh interpreter of its own (its exit
    code and clean stderr: ``test_a_profile_in_a_fresh_interpreter_prints_nothing_on_stderr``)
    runs under --fp8-slow only: the default tier checks the same command through ``main`` with
    the file descriptors captured (tests/cpu/tools/test_profile.py), so a fresh interpreter's
    whole profile (about 25 s of CPU, imports included) is not paid twice a run."""
    files = diff_inputs(folder)
    return {
        "with torch": pytest_each({"bad option": {"argv": ["profile", "--device", "nope"], "fp8ref": True}}),
        "difference": fp8ref_cli("diff", str(files["good"]), str(files["other"])),
        "missing": fp8ref_cli("diff", str(files["missing"]), str(files["good"])),
    }


def _call(beside: Any, name: str) -> subprocess.CompletedProcess:
    """One call's ``CompletedProcess``: its own process, or its part of the torch interpreter."""
    if name == "bad option":
        return pytest_each_result(beside("with torch"), name)
    return beside(name)


def test_the_contract_end_to_end_in_subprocesses(beside):
    """A difference found, a missing input, a bad option: exit 1, 2, 2, each error one line (exit 0
    of a whole profile: the slow test below, and test_profile.py through ``main``)."""
    calls = {k: _call(beside, k) for k in ("difference", "missing", "bad option")}
    got = {k: (done.returncode, done.stderr) for k, done in calls.items()}
    assert [code for code, _ in got.values()] == [1, 2, 2], got
    for k in ("missing", "bad option"):  # (an install may print its own import warnings before)
        err = got[k][1]
        assert err.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in err, err
        assert sum(line.startswith("error: ") for line in err.splitlines()) == 1, err


def stray_stderr(err: str) -> str:
    """What a profile that succeeded wrote on its stderr beyond what it may: torch's own warning at
    import where numpy is missing, and fp8ref's note of keys it could not measure here."""
    if not install.has_package("numpy"):  # torch's own warning at import, where numpy is missing
        err = re.sub(r"(?m)^.*UserWarning: Failed to initialize NumPy.*\n(^ .*\n)?", "", err)
    # fp8ref's note of keys it could not measure here (its own package missing): said, not stray
    return re.sub(r"(?m)^note: \d+ keys not measured here: fp8ref needs \w+.*\n", "", err)


@pytest.mark.slow  # a whole profile in a fresh interpreter: ~25 s of CPU; in-process: test_profile.py
def test_a_profile_in_a_fresh_interpreter_prints_nothing_on_stderr(tmp_path):
    """torch.profiler's kineto writes its start and stop lines, and on a CUDA build without a GPU
    a failed device count, straight to the process's stderr from C++, unless fp8ref's kernel probe
    quiets it (``gemm_probes.kernels_of``); a fresh interpreter adds what its imports print: a run
    that succeeds says so on stdout alone, exit 0."""
    done = subprocess.run(
        fp8ref_cli("profile", "--out", str(tmp_path / "profile.json")),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    stray = stray_stderr(done.stderr)
    assert stray == "", f"stray lines on stderr: {stray[:2000]!r}"
    assert done.stdout.startswith("wrote ") and done.stdout.count("\n") == 1, done.stdout


# --- trace (and profile --claims): a target module that fails to import is one line -----------

# a module of the user's that fails while it loads: (its source, the line it fails on, how the
# error line tells its error)
BROKEN_MODULES = {
    "a syntax error": ("x = 1\ndef f(:\n    pass\n", 2, "SyntaxError: "),
    "a missing import": (
        "import os\nimport fp8ref_test_no_such_module\n",
        2,
        "ModuleNotFoundError: No module named 'fp8ref_test_no_such_module'",
    ),
    "a raise at import": (
        "def setup():\n    raise RuntimeError('no GPU\\nfound at import')\n\n\nsetup()\n",
        2,
        "RuntimeError: no GPU found at import",  # (its two lines made one)
    ),
    "a library's error": ("import json\n\nCONFIG = json.loads('{')\n", 3, "JSONDecodeError: "),
}


@pytest.fixture
def users_folder(tmp_path, monkeypatch):
    """``tmp_path`` as the user's current folder, imported from as ``python -m`` would."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return tmp_path


@pytest.mark.parametrize("case", list(BROKEN_MODULES))
@pytest.mark.parametrize("command", ["trace", "profile --claims"])
def test_a_target_that_fails_to_import_is_one_error_line_naming_where(case, command, users_folder, capsys):
    """Before: the target's whole traceback, then the error line. Now its error and its place
    in one line (the traceback with --debug)."""
    source, line, starts = BROKEN_MODULES[case]
    module = "fp8user_broken_" + case.replace(" ", "_").replace("'", "")
    (users_folder / f"{module}.py").write_text(source)
    argv = ["trace", f"{module}:f"] if command == "trace" else ["profile", "--claims", f"{module}:f"]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    prefix = "--claims: " if command != "trace" else ""
    head = f"error: {prefix}target '{module}:f': module '{module}' cannot be imported ({starts}"
    assert len(lines) == 1 and lines[0].startswith(head), (head, lines)
    assert lines[0].endswith(f", at {module}.py:{line})"), lines


def test_a_module_of_the_targets_own_package_failing_is_placed_in_that_module(users_folder, capsys):
    """The innermost line of the target's own package (a helper module of its), not the
    import statement that reached it."""
    pkg = users_folder / "fp8user_pkg_broken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("\n\nVALUE = 1 / 0\n")
    (pkg / "steps.py").write_text("from . import helper\n")
    assert main(["trace", "fp8user_pkg_broken.steps:f"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    where = os.path.join("fp8user_pkg_broken", "helper.py")
    assert len(lines) == 1 and lines[0].endswith(f"(ZeroDivisionError: division by zero, at {where}:3)"), lines


def test_debug_shows_a_broken_targets_traceback(users_folder, capsys):
    (users_folder / "fp8user_debug_broken.py").write_text("raise RuntimeError('at import')\n")
    assert main(["--debug", "trace", "fp8user_debug_broken:f"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "fp8user_debug_broken.py" in err, err
    assert err.strip().splitlines()[-1].startswith("error: target 'fp8user_debug_broken:f': "), err


def test_a_target_module_that_is_not_there_stays_one_line(users_folder, capsys):
    assert main(["trace", "fp8user_not_there_at_all:f"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "error: target 'fp8user_not_there_at_all:f': module 'fp8user_not_there_at_all' cannot be imported "
        "(ModuleNotFoundError: No module named 'fp8user_not_there_at_all')"
    ], lines
