"""The suite's one gating rule (tests/plugins/gating.py): what a missing or refusing package skips
with; and the lane that runs processes beside the tests (tests/lane.py, tests/plugins/beside.py)."""

import os
import time

import pytest

from fp8ref.harness import install, probes
from tests.lane import Lane, python_code
from tests.plugins import gating
from tests.plugins.gating import ROOT


class _Item:
    """The part of a pytest item the gate reads: its markers."""

    def __init__(self, *marks):
        self.marks = marks

    def iter_markers(self, name):
        return (m for m in self.marks if m.name == name)

    def get_closest_marker(self, name):
        return next(self.iter_markers(name), None)


def _skip_reason(item) -> str | None:
    try:
        gating.pytest_runtest_setup(item)
    except pytest.skip.Exception as exc:
        return str(exc)
    return None


def test_a_missing_package_skips_naming_it_and_its_extra(monkeypatch):
    monkeypatch.setattr(install, "has_package", lambda pkg: pkg != "transformers")
    item = _Item(pytest.mark.needs("ml_dtypes", "transformers").mark)
    assert _skip_reason(item) == (
        "this test needs package transformers, which is not installed (pip install -e '.[finetune]')"
    )
    assert _skip_reason(_Item(pytest.mark.needs("ml_dtypes").mark)) is None


def test_a_torchao_that_does_not_import_skips_naming_the_versions(monkeypatch):
    monkeypatch.setattr(install, "has_package", lambda pkg: True)
    monkeypatch.setattr(probes, "torchao_float8", lambda: "refused: ImportError: cannot import name 'X'")
    reason = _skip_reason(_Item(pytest.mark.needs("torchao").mark))
    assert reason.startswith("torch ") and "cannot import torchao.float8: refused: ImportError" in reason


def test_a_broken_torchao_skips_the_tests_that_need_transformers_naming_it(monkeypatch):
    """transformers imports an installed torchao itself: a torchao that does not import with this
    torch breaks it too, and its tests skip saying why rather than fail."""
    monkeypatch.setattr(install, "has_package", lambda pkg: True)
    monkeypatch.setattr(probes, "torchao_float8", lambda: "refused: ImportError: cannot import name 'X'")
    reason = _skip_reason(_Item(pytest.mark.needs("transformers", "datasets").mark))
    assert reason.startswith("transformers imports torchao, which torch ") and "cannot import name 'X'" in reason
    monkeypatch.setattr(probes, "torchao_float8", lambda: None)
    assert _skip_reason(_Item(pytest.mark.needs("transformers", "datasets").mark)) is None


def test_a_broken_torchao_is_one_line_from_the_fine_tune_command(monkeypatch, capsys):
    pytest.importorskip("transformers")
    from fp8ref.__main__ import main

    monkeypatch.setattr(probes, "torchao_float8", lambda: "refused: ImportError: cannot import name 'X'")
    assert main(["finetune", "--preset", "tiny", "--steps", "2", "--no-progress", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: transformers imports torchao") and "cannot import" in err[0]


def test_an_unregistered_package_is_an_error_not_a_skip():
    """needs() names only packages whose extra is known, so every skip can say how to install."""
    with pytest.raises(ValueError, match="pkg: expected one of"):
        gating.pytest_runtest_setup(_Item(pytest.mark.needs("no_such_package").mark))


def test_the_lane_runs_its_processes_one_after_another_in_order(tmp_path):
    mark = tmp_path / "first"
    lane = Lane()
    try:
        lane.submit(
            "first", python_code("import sys, time; time.sleep(0.3); open(sys.argv[1], 'w').write('done')", str(mark))
        )
        lane.submit("second", python_code("import sys; print(open(sys.argv[1]).read()); sys.exit(3)", str(mark)))
        assert "second" in lane and "third" not in lane
        second = lane.result("second", timeout=60)  # it started after the first had ended
        assert (second.returncode, second.stdout.strip()) == (3, "done")
        assert lane.result("first").returncode == 0 and lane.idle()
        with pytest.raises(ValueError, match="'first' was submitted already"):
            lane.submit("first", python_code("pass"))
    finally:
        lane.close()


def test_a_process_that_cannot_start_fails_its_reader_and_the_lane_goes_on(tmp_path):
    lane = Lane()
    try:
        lane.submit("nowhere", python_code("pass"), cwd=tmp_path / "no such folder")
        lane.submit("after", python_code("print('ran')"))
        with pytest.raises(RuntimeError, match="nowhere: could not be started"):
            lane.result("nowhere", timeout=60)
        assert lane.result("after", timeout=60).stdout.strip() == "ran"
    finally:
        lane.close()


def test_closing_the_lane_stops_the_running_process(tmp_path):
    pid_file = tmp_path / "pid"
    lane = Lane()
    lane.submit(
        "sleeper",
        python_code(
            "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)", str(pid_file)
        ),
    )
    lane.submit("never", python_code("pass"))
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the lane's process never started"
        time.sleep(0.01)
    lane.close()
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)
    assert not lane.idle()  # the queue was dropped, not run
    with pytest.raises(TimeoutError, match="never"):
        lane.result("never", timeout=0.01)


def test_the_extras_have_one_home_pyprojects_optional_dependencies(monkeypatch):
    """A skip names the extra from pyproject.toml itself (read through fp8ref's metadata, or the
    file in a checkout that was not installed): both readings agree, and every package the suite
    gates on has one."""
    import importlib.metadata
    import sys

    if sys.version_info < (3, 11):
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11+)")
    installed = install._extras()

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    from_file = install._extras()
    assert from_file == installed, "the installed metadata lags pyproject.toml: pip install -e . again"
    for pkg, extra in {"torchao": "test", "ml_dtypes": "test", "transformers": "finetune"}.items():
        assert from_file[pkg][1] == extra
    assert from_file["ml_dtypes"][0] == "ml-dtypes"


def run_beside(folder):
    """pytest itself on a GPU test, on this machine: with --fp8-require-gpu (and, to show it wins,
    --fp8-dry-run too), and without (the control: the same test skips and the run passes)."""
    import sys

    base = [
        sys.executable,
        "-m",
        "pytest",
        "tests/gpu/test_cuda_golden_profile.py",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        f"--basetemp={folder / 'run'}",
    ]
    return {
        "required": (base + ["--fp8-require-gpu", "--fp8-dry-run"], {"cwd": ROOT}),
        "not required": (base, {"cwd": ROOT}),
    }


def test_no_usable_gpu_fails_the_run_under_require_gpu(beside):
    """A runner whose CUDA is missing or broken must not pass by skipping every GPU test."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the guard has nothing to refuse")
    required, control = beside("required"), beside("not required")
    assert required.returncode == 1, required.stdout[-2000:] + required.stderr[-2000:]
    assert (
        "--fp8-require-gpu: no usable CUDA GPU: torch.cuda.is_available() is False" in required.stdout + required.stderr
    )
    assert control.returncode == 0 and "skipped" in control.stdout, control.stdout[-2000:]


def test_a_compiling_test_cannot_fall_back_to_eager_under_a_compiled_label(fresh_dynamo):
    """fresh_dynamo: static shapes, and the recompile limit an error (past it, dynamo would run
    the function eagerly while the test still calls it compiled). (dynamo's own config.patch,
    not monkeypatch: monkeypatch's undo deletes a config entry it did not find in the module's
    __dict__, and every later compile fails.)"""
    import torch._dynamo

    assert torch._dynamo.config.automatic_dynamic_shapes is False
    with torch._dynamo.config.patch(recompile_limit=1):
        f = torch.compile(lambda t: t * 2, backend="eager", dynamic=False)
        f(torch.ones(2))
        with pytest.raises(Exception, match="(?i)recompile"):
            f(torch.ones(3))  # a second shape: a recompile past the limit of one
    assert torch._dynamo.config.recompile_limit > 1  # restored
