"""The module check (fp8ref.harness.twin) on a team's own FP8 MLP (tests/meta/twin_team.py) with
one planted bug at a time: each fails the check at the lifecycle event where it shows, naming the
submodule, the tensor and the team's line that ran its FP8 ops; the mended module passes. None of
these bugs runs an incorrect torch op (the tracer passes them) and only three touch a function a
claim would hold (issue 53)."""

import re

import pytest

from fp8ref.harness.claims import failures, report
from fp8ref.harness.twin import ModuleCheck, Operand, Recipe, Scaling, check_module
from fp8ref.harness.twin.examples import linear_twin
from tests.meta import twin_team

pytestmark = [pytest.mark.cpu, pytest.mark.meta]

DELAYED = Recipe(*(Operand(f, Scaling("delayed", history_len=16)) for f in ("e4m3fn", "e4m3fn", "e5m2")))

# fault -> (delayed scaling?, the event it first fails at, the submodule and tensor first outside
# its bound in execution order (a backward runs fc2 before fc1), the tagged line it names)
FAULTS = {
    "grad_forward_scale": (False, "first step", "fc2", "grad input", "grad_x"),
    "stale_cache": (False, "after an SGD step", "fc1", "output", "mm"),
    "packed_memory_order": (False, "first step", "fc2", "grad input", "grad_x"),
    "history_order": (True, "after an SGD step", "fc1", "output", "cast"),
    "saturate_240": (False, "first step", "fc1", "output", "cast"),
    "float16_round_trip": (False, "first step", "fc2", "grad input", "cast"),
    "inf_scale_at_zero": (False, "an all-zero batch", "fc1", "output", "cast"),
}


def _check(delayed: bool) -> ModuleCheck:
    recipe = DELAYED if delayed else Recipe()
    return ModuleCheck("team mlp", lambda seed: twin_team.TeamMlp(seed, delayed), linear_twin, recipe)


def _line(tag: str) -> int:
    source = open(twin_team.__file__).read().splitlines()
    return next(i + 1 for i, text in enumerate(source) if text.rstrip().endswith(f"# site: {tag}"))


@pytest.fixture
def fault(request, monkeypatch):
    monkeypatch.setattr(twin_team, "FAULT", request.param)
    return request.param


@pytest.mark.parametrize("fault", ["grad_forward_scale"], indirect=True)
def test_a_cast_in_a_helper_names_the_line_that_called_it_and_only_the_failing_phase(fault):
    """The team's cast sits in a helper (``quantize``) every cast goes through; the bug is the
    backward's call of it with the forward's scale. The failure names that call (the helper's line
    <- its caller), and a failed gradient names the backward's lines, not the forward's GEMM."""
    bad = failures(check_module(_check(False)))
    assert bad, fault
    problem = bad[0].problem
    chains = re.findall(r"twin_team\.py:(\d+) <- \S*twin_team\.py:(\d+)", problem)
    assert (str(_line("cast")), str(_line("grad_cast_call"))) in chains, (chains, problem)
    assert f"twin_team.py:{_line('mm')}" not in problem, problem  # (the forward's GEMM)


@pytest.mark.parametrize("fault", list(FAULTS), indirect=True)
def test_each_fault_fails_naming_submodule_tensor_and_line(fault):
    delayed, event, submodule, tensor, tag = FAULTS[fault]
    results = check_module(_check(delayed))
    bad = failures(results)
    assert bad, f"{fault} passed the module check:\n{report(results)}"
    first = bad[0]
    assert first.case == event, report(results)
    assert f"submodule {submodule!r}, {tensor}:" in first.problem, first.problem
    sites = re.findall(r"twin_team\.py:(\d+)", first.problem)
    assert str(_line(tag)) in sites, (tag, _line(tag), first.problem)
    measured = re.search(r"error (\S+) where its bound allows (\S+)", first.problem)
    assert measured, first.problem
    # the bound sits at most at half of each real fault's error (measured 3.5x to 9x on torch 2.13
    # and 2.14; an infinite scale gives an infinite error): a bound twice as loose still fails it
    error, allowed = (float(v) for v in measured.groups())
    assert error >= 2 * allowed, (fault, error, allowed)


@pytest.mark.parametrize("delayed", [False, True], ids=["current", "delayed"])
def test_the_mended_module_passes(delayed, monkeypatch):
    monkeypatch.setattr(twin_team, "FAULT", None)
    results = check_module(_check(delayed))
    assert not failures(results), report(results)
    assert all(r.measure and r.measure.startswith("error") for r in results), report(results)
