"""Faults on the block-scaled and weight-only paths, which touch a float8 dtype only at their ends
(``trace.dequantized``):

- torch's CPU ``exp2`` one binade high on float32 (``2^(x+1)``): torchao's ``to_mx`` makes each
  MX block's reciprocal scale ``exp2(127 - e)`` with it, so every E4M3 element comes out twice
  what its E8M0 scale says while each cast is right for its input; the ``mx_training`` trace must
  name ``aten.exp2`` as an E8M0 scale's arithmetic, at the workload's lines;
- torch's CPU ``pow`` of float32 tensors one binade high: torchao's dequantize makes the scale
  ``pow(2, e - 127)`` from the E8M0 bytes with it, before the emulated GEMM;
- torch's CPU ``mm`` rounding each partial sum to bfloat16: the emulated MX GEMMs, every operand
  right, must be violations of the bound a float32 accumulator gives;
- torch's CPU ``mul`` doubling a float32 matrix times a float32 row (Float8WeightOnly's
  dequantize: decoded codes times the per-row scales): the weight-only GEMM must be a violation
  naming the ``mul`` that made its operand.

Each fault is registered for the CPU only for the traced run; the definition's side (the E8M0
decode, the float64 products) does not go through them."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.trace import Trace, trace
from fp8ref.harness.workloads import WORKLOADS, check
from fp8ref.harness.workloads.base import source_file
from tests.common.kernels import cpu_kernel_replaced as _cpu_kernel


def _exp2_one_binade_high(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    torch.ops.aten.exp2.out(x, out=out)  # (torch's own kernel: the out= overload is not replaced)
    return out * 2 if x.dtype == torch.float32 else out


def _pow_one_binade_high(base: torch.Tensor, exponent: torch.Tensor) -> torch.Tensor:
    shape = torch.broadcast_shapes(base.shape, exponent.shape)
    out = torch.empty(shape, dtype=torch.result_type(base, exponent))
    torch.ops.aten.pow.Tensor_Tensor_out(base, exponent, out=out)
    return out * 2 if out.dtype == torch.float32 else out


def _dequantize_doubled(a: torch.Tensor, b: object) -> torch.Tensor:
    b = b if isinstance(b, torch.Tensor) else torch.as_tensor(b)  # (a Python number reaches the kernel too)
    out = torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.result_type(a, b))
    torch.ops.aten.mul.out(a, b, out=out)
    rowwise = a.dim() == 2 and b.dim() == 2 and b.shape[0] == 1 and a.shape[0] > 1
    return out * 2 if rowwise and a.dtype == b.dtype == torch.float32 else out


def _mm_accumulating_in_bfloat16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    if a.dtype != torch.bfloat16:
        return torch.ops.aten.mm.out(a, b, out=out)
    acc = torch.zeros_like(out)
    for k in range(a.shape[1]):  # (each partial sum rounded to bfloat16: a kernel without a float32 accumulator)
        acc = (acc.float() + a[:, k : k + 1].float() * b[k : k + 1, :].float()).to(torch.bfloat16)
    return out.copy_(acc)


def _traced(name: str, op: str, kernel: Callable[..., torch.Tensor]) -> Trace:
    with _cpu_kernel(op, kernel):
        return trace(WORKLOADS[name].run)


def _at_the_workloads_lines(got: Trace, name: str) -> bool:
    return all(v.site.rpartition(":")[0] == source_file(WORKLOADS[name]) for v in got.violations)


@pytest.mark.parametrize(
    ("op", "kernel", "named"),
    [
        ("exp2", _exp2_one_binade_high, "aten.exp2.default"),
        ("pow.Tensor_Tensor", _pow_one_binade_high, "aten.pow.Tensor_Tensor"),
    ],
)
def test_an_e8m0_scale_one_binade_high_fails_the_mx_training_trace_at_its_op(skip_if_refused, op, kernel, named):
    workload = WORKLOADS["mx_training"]
    skip_if_refused(workload.refusal("cpu"), "the mx_training workload")
    got = _traced("mx_training", op, kernel)
    problem = check(workload, got)
    assert problem is not None, "the trace is clean"
    assert {(v.op, v.kind) for v in got.violations} == {(named, "e8m0_scale")}, problem
    assert _at_the_workloads_lines(got, "mx_training"), problem
    first = got.violations[0]
    assert "differs from the E8M0 decode" in first.problem and first.difference is not None, first.report()


def test_a_gemm_of_mx_blocks_accumulating_in_bfloat16_fails_the_mx_training_trace_at_its_mm(skip_if_refused):
    """Every operand right, the product's partial sums rounded to bfloat16: outside the bound a
    float32 accumulator gives (K partial sums, one output rounding)."""
    workload = WORKLOADS["mx_training"]
    skip_if_refused(workload.refusal("cpu"), "the mx_training workload")
    got = _traced("mx_training", "mm", _mm_accumulating_in_bfloat16)
    problem = check(workload, got)
    assert problem is not None, "the trace is clean"
    assert {(v.op, v.kind) for v in got.violations} == {("aten.mm.default", "dequantized_gemm")}, problem
    assert all("outside the exact product" in v.problem for v in got.violations), problem
    assert _at_the_workloads_lines(got, "mx_training"), problem


def test_a_weight_only_dequantize_off_by_its_scale_fails_the_gemm_naming_the_mul(skip_if_refused):
    name = "float8_inference.Float8WeightOnlyConfig"
    skip_if_refused(WORKLOADS[name].refusal("cpu"), f"the {name} workload")
    got = _traced(name, "mul.Tensor", _dequantize_doubled)
    problem = check(WORKLOADS[name], got)
    assert problem is not None, "the trace is clean"
    assert {(v.op, v.kind) for v in got.violations} == {("aten.mm.default", "dequantized_gemm")}, problem
    assert all("made by aten.mul.Tensor at " in v.problem for v in got.violations), problem
    assert _at_the_workloads_lines(got, name), problem


def test_the_faults_leave_the_definitions_side_alone():
    """The kernels replaced keep float64 (the tracer's exact side) right: a fault the tests see is
    the program's, not the check's."""
    x = torch.tensor([-3.0, 0.0, 5.0], dtype=torch.float64)
    two = torch.full_like(x, 2.0)
    with _cpu_kernel("exp2", _exp2_one_binade_high), _cpu_kernel("pow.Tensor_Tensor", _pow_one_binade_high):
        assert torch.equal(torch.exp2(x), torch.tensor([0.125, 1.0, 32.0], dtype=torch.float64))
        assert torch.equal(torch.pow(two, x), torch.tensor([0.125, 1.0, 32.0], dtype=torch.float64))
        assert torch.equal(torch.exp2(x.float()), torch.tensor([0.25, 2.0, 64.0]))
    assert os.path.basename(source_file(WORKLOADS["mx_training"])) == "mx_training.py"
