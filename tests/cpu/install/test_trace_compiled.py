"""Programs that call torch.compile'd code under the tracer (fp8ref/harness/trace/compiled.py):
torch runs compiled code eagerly under a dispatch mode, so ``trace`` checks the eager ops, and
``trace_compiled`` lets the regions run compiled, to be held to the eager run at their boundary.

Why a test may fail: a torch release that runs compiled code under any dispatch mode (the tracer
would then see generated kernels where it expects eager ops: the op-by-op checks would thin out
unseen), or a bitwise comparison that takes -0 for +0 or one NaN payload for another."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.trace import trace
from fp8ref.harness.trace.compiled import bitwise_differences, trace_compiled

E4M3 = torch.float8_e4m3fn


def _cast(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).to(E4M3)


def _counting(calls: list) -> object:
    def backend(gm, example_inputs):
        calls.append(gm)
        return gm

    return backend


def test_under_the_tracer_a_compiled_function_runs_its_eager_ops_and_the_trace_says_so(fresh_dynamo):
    calls: list = []
    got = trace(torch.compile(_cast, backend=_counting(calls)), torch.ones(4))
    assert calls == [], "torch.compile compiled under the tracer: its checks would judge generated code"
    assert [r.op for r in got.records] == ["aten._to_copy.default"] and not got.violations
    assert got.ran_eagerly == 1 and "compare_compiled" in got.summary()[-1]
    assert trace(_cast, torch.ones(4)).ran_eagerly == 0


def test_traced_compiled_a_region_runs_through_its_backend(fresh_dynamo):
    seen: list = []
    got = trace_compiled(torch.compile(_cast, backend=_counting(seen)), torch.ones(4))
    assert len(seen) == 1, "the region was not compiled under trace_compiled"
    assert got.ran_eagerly == 0
    assert got.result.view(torch.uint8).tolist() == [0x40] * 4  # (2.0 in E4M3)


@pytest.mark.parametrize(
    ("a", "b", "differs"),
    [
        ([0.0], [-0.0], True),
        ([1.0, 2.0], [1.0, 2.0], False),
        ([1.0], [1.0, 1.0], True),
    ],
)
def test_results_compare_bit_for_bit(a, b, differs):
    got = bitwise_differences([torch.tensor(a).to(E4M3)], [torch.tensor(b).to(E4M3)])
    assert bool(got) is differs, got


def test_two_nan_payloads_differ():
    a = torch.tensor([0x7F], dtype=torch.uint8).view(E4M3)
    b = torch.tensor([0xFF], dtype=torch.uint8).view(E4M3)
    assert bitwise_differences((a,), (b,)) == ["output 0 (torch.float8_e4m3fn(1,)): 1 of 1 bytes differ compiled"]
    assert bitwise_differences({"x": 1}, {"x": 1}) == [] and bitwise_differences({"x": 1}, {"x": 2})


def test_a_calls_packet_matches_its_other_overloads():
    from fp8ref.harness.trace.compiled import _packet

    assert _packet("aten._scaled_mm.out") == _packet("aten._scaled_mm.default") == "aten._scaled_mm"
    assert _packet("aten.outer.default") == "aten.outer"


def test_functionalized_ops_on_real_values_are_recorded_unchecked_not_passed():
    """A functional tensor over real values (``functionalize`` run eagerly) is no program traced
    without running: its float8 ops are recorded, unchecked with the reason, not let through."""
    from torch._subclasses.functional_tensor import dispatch_functionalize

    got = trace(dispatch_functionalize(lambda x: (x * 2).to(E4M3).float()), torch.ones(4))
    assert got.staged == 0 and got.records, got.summary()
    assert all(r.status == "unchecked" and "functional tensor over real values" in r.reason for r in got.records)


def test_after_a_trace_a_compiled_function_compiles_again(fresh_dynamo):
    """Refused by the tracer's mode, dynamo marks the function to run eagerly from then on: the
    trace resets it, so the program's next call, outside the tracer, compiles."""
    calls: list = []
    compiled = torch.compile(_cast, backend=_counting(calls))
    trace(compiled, torch.ones(4))
    assert calls == []
    compiled(torch.ones(4))
    assert len(calls) == 1, "the function stayed eager after the trace"
