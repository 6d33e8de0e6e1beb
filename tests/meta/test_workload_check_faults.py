"""The workload check (``fp8ref.harness.workloads.check``) against stand-in workloads whose trace
has no violation and is still wrong for what the workload claims: one whose FP8 calls are made
from another module than the one it names (its call sites are not its own lines), one that makes
fewer FP8 calls of a kind than it ``expects`` (it did not check what it is for). Each must be a
problem naming why; the same programs, declared truthfully, must pass."""

from __future__ import annotations

import torch

from fp8ref.harness.trace import trace
from fp8ref.harness.workloads import Workload, check, tiny

E4M3 = torch.float8_e4m3fn
CAST = ("aten._to_copy.default", "cast")


def _two_casts() -> torch.Tensor:
    x = torch.tensor([1.0, -0.3, 448.0, 2.0**-9])
    return x.to(E4M3).float() + (2 * x).to(E4M3).float()  # two casts into float8, both right


def _workload(module: str = __name__, expects: int = 2) -> Workload:
    return Workload(
        name="stand-in",
        what="two casts into E4M3",
        module=module,
        run=_two_casts,
        refusal=lambda device: None,
        expects={CAST: expects},
        torchao=False,
    )


def workload_check_faults_caught() -> dict[str, bool]:
    """Each stand-in's check a problem (for tests/meta/test_catch_rate.py)."""
    got = trace(_two_casts)
    return {
        "call sites outside the module it names": check(_workload(module=tiny.__name__), got) is not None,
        "fewer checked calls than it expects": check(_workload(expects=3), got) is not None,
    }


def test_a_truthful_stand_in_workload_passes():
    got = trace(_two_casts)
    assert not got.violations, [v.report() for v in got.violations]
    assert check(_workload(), got) is None


def test_call_sites_outside_the_workloads_module_are_a_problem():
    """The workload names another module (a shipped workload's helpers) as the one whose lines call
    its ops: its trace's call sites, this file's lines, lie outside it."""
    problem = check(_workload(module=tiny.__name__), trace(_two_casts))
    assert problem is not None and "call sites outside" in problem and "tiny.py" in problem, problem
    assert __file__.rpartition("/")[2] in problem, problem  # (the site it found, named)


def test_fewer_checked_calls_than_the_workload_expects_are_a_problem():
    """The program makes two casts; a workload that expects three did not check what it is for."""
    problem = check(_workload(expects=3), trace(_two_casts))
    assert problem is not None and "aten._to_copy.default checked as cast: 2 call(s)" in problem, problem
    assert "at least 3" in problem, problem


def test_unchecked_calls_do_not_count_toward_what_a_workload_expects():
    """The trace's records of the casts marked unchecked (a check that could not be made): the
    workload saw none of the calls it expects checked."""
    got = trace(_two_casts)
    for record in got.records:
        if (record.op, record.kind) == CAST:
            record.status = "unchecked"
    problem = check(_workload(), got)
    assert problem is not None and "checked as cast: 0 call(s)" in problem, problem
