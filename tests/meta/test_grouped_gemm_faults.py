"""Grouped GEMMs: a stand-in that multiplies the last group by the first expert's weight, one that
reads the group offsets one row off, and an MXFP8 weight gradient whose blocks of 32 tokens run
across experts; each through the checks tests/cpu/install/test_grouped_gemm.py runs
(fp8ref/harness/gemm/grouped_bounds.py), which must report it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.gemm import grouped_bounds as gc
from fp8ref.reference import grouped as ref


def _autograd(fn):
    """A stand-in grouped GEMM as a differentiable function of (a, b, offs), computed in float32."""

    def call(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return fn(a.float(), b.float(), offs).to(torch.bfloat16)

    return call


def _own_expert(group: int, experts: int) -> int:
    return group


def _groups(
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor,
    expert_of: Callable[[int, int], int] = _own_expert,
    shift: int = 0,
) -> torch.Tensor:
    """The grouped product, group g multiplied by expert ``expert_of(g, experts)``'s weight, every
    boundary between two groups moved ``shift`` rows (the first start and the last end stay)."""
    bounds = ref.group_bounds(offs, a.shape[0])
    last = len(bounds) - 1
    rows = []
    for g, (start, end) in enumerate(bounds):
        start = start + shift if g > 0 else start
        end = end + shift if g < last else end
        rows.append(a[start:end] @ b[expert_of(g, len(bounds))])
    return torch.cat(rows)


def _last_group_first_expert(a, b, offs):
    return _groups(a, b, offs, expert_of=lambda g, n: 0 if g == n - 1 else g)


def _offsets_one_row_off(a, b, offs):
    return _groups(a, b, offs, shift=1)


def _mx_wgrad_across_experts(a, b, offs):
    """The MXFP8 grouped GEMM with its weight gradient's operands quantized in blocks of 32 tokens
    over the whole tensor (a block may hold two experts' tokens), forward and input gradient right."""

    class Gemm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, o):
            ctx.save_for_backward(x, w, o)
            return ref.grouped_mm(ref.mx_operand(x), ref.mx_operand(w, dim=1), o).to(torch.bfloat16)

        @staticmethod
        def backward(ctx, g):
            x, w, o = ctx.saved_tensors
            da, _ = ref.grouped_mm_backward(ref.mx_operand(x), ref.mx_operand(w, dim=2), o, ref.mx_operand(g))
            pad = -x.shape[0] % 32
            xt = ref.mx_operand(torch.cat([x.float(), x.new_zeros(pad, x.shape[1]).float()]), dim=0)[: x.shape[0]]
            gt = ref.mx_operand(torch.cat([g.float(), g.new_zeros(pad, g.shape[1]).float()]), dim=0)[: g.shape[0]]
            _, db = ref.grouped_mm_backward(xt, w, o, gt)
            return da.to(x.dtype), db.to(w.dtype), None

    return Gemm.apply(a, b, offs)


FAULTS = {
    "the last group multiplied by the first expert": lambda: gc.check_grouped_mm(
        "cpu", "ragged", fn=_autograd(_last_group_first_expert)
    ),
    "group offsets read one row off": lambda: gc.check_grouped_mm("cpu", "ragged", fn=_autograd(_offsets_one_row_off)),
    "MXFP8 weight-gradient blocks across experts": lambda: gc.check_mxfp8_grouped_mm(
        "cpu", "ragged", pad=True, fn=_mx_wgrad_across_experts
    ),
}


def grouped_fault_caught(fault: str) -> bool:
    refused, problem = FAULTS[fault]()
    assert refused is None, refused
    return problem is not None


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_grouped_gemm_fault_is_caught(fault):
    assert grouped_fault_caught(fault), f"{fault}: not caught"


def test_the_checks_pass_a_faithful_stand_in():
    assert gc.check_grouped_mm("cpu", "ragged", fn=_autograd(_groups)) == (None, None)
