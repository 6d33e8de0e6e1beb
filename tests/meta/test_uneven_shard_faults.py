"""FSDP2's float8 all-gather of uneven shards, through ``fsdp_float8.uneven_shards_problem`` (which
tests/cpu/install/test_fsdp_float8.py holds tests/scripts/fsdp_float8.py's results to): on an
install known to abort a gloo rank there, a run that goes through (the expectation is stale), a
Python error instead of the abort, or a rank ended by another signal; on any other install, an
abort, or a run that differs from the unsharded model. Each must be reported; the expected abort
and a matching run must not."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.distributed import fsdp_float8

ABORTS = {"torch": "2.13.0+cpu", "torchao": "0.18.0"}  # one of fsdp_float8.UNEVEN_SHARDS_ABORT
RUNS = {"torch": "2.12.1", "torchao": "0.18.0"}  # not one of them
SIGABRT = {"error": "crashed: ProcessExitedException: process 1 terminated with signal SIGABRT", "signal": "SIGABRT"}
SIGSEGV = {"error": "crashed: ProcessExitedException: process 0 terminated with signal SIGSEGV", "signal": "SIGSEGV"}


def _run() -> tuple[dict, dict]:
    """One step of two weights as the script records it: a sharded run and the unsharded one."""
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(7, 4, generator=gen), torch.randn(2, 7, generator=gen)]
    gathers = []
    for w in (weights[0], weights[1], weights[1], weights[0]):  # forward, then backward
        codes, scale = fsdp_float8.reference_cast(w)
        gathers.append({"codes": codes, "scale": scale, "reused_buffer": False, "dtype": "torch.float8_e4m3fn"})
    final = {"0.weight": weights[0] - 0.1, "2.weight": weights[1] - 0.1}
    unsharded = {"losses": [1.0], "grads": {"0.weight": weights[0] * 0.5}, "weights": final}
    run = {**unsharded, "all_gathers": gathers, "weights_before_step": [weights]}
    return run, unsharded


def _results(versions: dict, rank_runs: list[dict], unsharded: dict) -> dict:
    return {
        "versions": versions,
        "ranks": [{"fsdp2_uneven": r} for r in rank_runs],
        "unsharded_uneven": unsharded,
    }


def _case(name: str) -> dict:
    run, unsharded = _run()
    wrong = {**run, "weights": {**run["weights"], "0.weight": run["weights"]["0.weight"] + 1}}
    cases = {
        # what must pass
        "expected abort": (ABORTS, [SIGABRT, SIGABRT]),
        "a run that matches": (RUNS, [run, run]),
        # the faults
        "runs where an abort is expected (stale)": (ABORTS, [run, run]),
        "a Python error where an abort is expected": (ABORTS, [{"error": "RuntimeError: size mismatch"}, run]),
        "another signal where an abort is expected": (ABORTS, [SIGSEGV, SIGSEGV]),
        "an abort where the run is expected": (RUNS, [SIGABRT, SIGABRT]),
        "a run that differs from the unsharded model": (RUNS, [run, wrong]),
    }
    versions, rank_runs = cases[name]
    return _results(versions, rank_runs, unsharded)


FAULTS = (
    "runs where an abort is expected (stale)",
    "a Python error where an abort is expected",
    "another signal where an abort is expected",
    "an abort where the run is expected",
    "a run that differs from the unsharded model",
)


def uneven_fault_caught(fault: str) -> bool:
    return fsdp_float8.uneven_shards_problem(_case(fault)) is not None


@pytest.mark.parametrize("case", ["expected abort", "a run that matches"])
def test_the_expected_outcome_passes(case):
    problem = fsdp_float8.uneven_shards_problem(_case(case))
    assert problem is None, problem


def test_a_stale_expectation_says_so():
    problem = fsdp_float8.uneven_shards_problem(_case(FAULTS[0]))
    assert problem is not None and "the expectation is stale" in problem, problem


@pytest.mark.parametrize("fault", FAULTS)
def test_uneven_shard_fault_is_caught(fault):
    assert uneven_fault_caught(fault), f"the uneven-shard expectation did not notice: {fault}"
