"""The fixtures tests share (tests/plugins/fixtures.py): the GPU guard of a runner, and a
compiling test's fresh dynamo."""

import pytest

from tests.common.beside import pytest_each, pytest_each_result
from tests.common.paths import ROOT


def run_beside(folder):
    """pytest itself on a GPU test, on this machine: with --fp8-require-gpu (and, to show it wins,
    --fp8-dry-run too), and without (the control: the same test skips and the run passes); both
    runs in one interpreter (tests/scripts/pytest_each.py)."""
    base = ["tests/gpu/test_golden_profile.py", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    runs = {
        "required": base + [f"--basetemp={folder / 'required'}", "--fp8-require-gpu", "--fp8-dry-run"],
        "not required": base + [f"--basetemp={folder / 'not required'}"],
    }
    return {"runs": pytest_each({name: {"argv": argv, "cwd": str(ROOT)} for name, argv in runs.items()})}


def test_no_usable_gpu_fails_the_run_under_require_gpu(beside):
    """A runner whose CUDA is missing or broken must not pass by skipping every GPU test."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the guard has nothing to refuse")
    required, control = (pytest_each_result(beside("runs"), name) for name in ("required", "not required"))
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


class _Session:
    """What pytest_sessionstart reads of a session: its options."""

    def __init__(self, **options: object) -> None:
        self.config = self
        self.options = {"--fp8-require": [], "--fp8-require-gpu": False, **options}

    def getoption(self, name: str) -> object:
        return self.options[name]


def test_a_required_package_that_is_missing_fails_the_run():
    """A runner without torchao would pass with every Float8Linear check skipped: --fp8-require
    names what it must have, and a missing one stops the run at its start with exit 1, naming it
    (the same hook whose exit the GPU guard's run above shows in a real pytest process)."""
    from tests.plugins.fixtures import pytest_sessionstart

    with pytest.raises(pytest.exit.Exception) as stopped:
        pytest_sessionstart(_Session(**{"--fp8-require": ["pytest,no_such_package_fp8ref"]}))
    assert stopped.value.returncode == pytest.ExitCode.TESTS_FAILED
    assert "--fp8-require: no_such_package_fp8ref: not installed" in str(stopped.value)
    pytest_sessionstart(_Session(**{"--fp8-require": ["pytest,torch"]}))  # all there


def test_required_packages_are_read_from_comma_lists_and_torchao_must_import(monkeypatch):
    from fp8ref.harness.stack import probes
    from tests.plugins.fixtures import missing_required

    assert missing_required(["pytest,torch", "torch"]) == []
    assert missing_required(["pytest,no_such_package_fp8ref"]) == ["no_such_package_fp8ref: not installed"]
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    assert missing_required(["torchao"]) == ["torchao: refused: ImportError: cannot import name 'X'"]


def test_a_graph_break_is_seen_by_the_compile_check():
    """fresh_dynamo fails a test whose compiled code broke its graph (part of it then ran eagerly
    under a 'compiled' label); graph_breaks() is what it reads: one break counted here, none for a
    function that compiles whole."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    from tests.plugins.fixtures import fail_on_graph_breaks, graph_breaks

    def broken(x):
        y = x * 2
        torch._dynamo.graph_break()
        return y + 1

    torch._dynamo.reset()
    counters.clear()
    try:
        torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)(torch.ones(3))
        assert graph_breaks() == {}
        fail_on_graph_breaks()  # nothing to fail
        torch.compile(broken, backend="eager", dynamic=False)(torch.ones(3))
        assert len(graph_breaks()) == 1 and "graph_break()" in next(iter(graph_breaks()))
        with pytest.raises(pytest.fail.Exception, match="broke its graph"):
            fail_on_graph_breaks()
    finally:
        torch._dynamo.reset()
        counters.clear()
