"""``_scaled_mm`` at realistic sizes (fp8ref/harness/gemm/scaled_mm_quality.py, the check of
tests/gpu/test_scaled_mm_quality.py): stand-ins on the CPU that round the output toward zero,
round the scales through bfloat16, drop a scale or transpose the rowwise scales, each caught by the
derived bound; the first two pass DeepGEMM's acceptance (calc_diff < 1e-3, SQNR >= 25 dB), which
the bound replaced."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.gemm import scaled_mm_quality as q

SHAPE = (128, 256, 128)  # M = N, so rowwise scales can be read along the wrong axis


def _truncated(x: torch.Tensor) -> torch.Tensor:
    """float32 -> bfloat16 rounding toward zero (the low 16 bits dropped)."""
    bits = x.float().contiguous().view(torch.int32) & -65536
    return bits.view(torch.float32).to(torch.bfloat16)


def stand_in(fault: str | None) -> Callable[..., torch.Tensor]:
    """A float64 ``_scaled_mm`` for tensorwise and rowwise scales, with one ``FAULTS`` fault."""

    def mm(A, B, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
        sa, sb = scale_a.double(), scale_b.double()
        if fault == "scales rounded through bfloat16":
            sa, sb = scale_a.bfloat16().double(), scale_b.bfloat16().double()
        if fault == "scale_b dropped":
            sb = torch.ones_like(sb)
        if fault == "rowwise scales transposed":
            sa, sb = sa.reshape(1, -1), sb.reshape(-1, 1)
        out = (A.double() @ B.double()) * sa * sb
        if fault == "output rounded toward zero":
            return _truncated(out).to(out_dtype)
        return out.float().to(out_dtype)

    return mm


FAULTS = [
    "output rounded toward zero",
    "scales rounded through bfloat16",
    "scale_b dropped",
    "rowwise scales transposed",
]
# what DeepGEMM's acceptance let through: errors of an ulp or less, far below 25 dB of SQNR
MISSED_BEFORE = FAULTS[:2]


def _verdicts(fault: str | None, values: str) -> tuple[str | None, str | None]:
    """(the bound's problem, DeepGEMM's acceptance's problem) for a rowwise GEMM on the stand-in."""
    c = q.case("rowwise", values, SHAPE, "cpu")
    real = torch._scaled_mm
    torch._scaled_mm = stand_in(fault)
    try:
        out = q.run(c, torch.bfloat16)
    finally:
        torch._scaled_mm = real
    return q.bound_problem(c, out, "cpu", False), q.deepgemm_problem(c, out)


def quality_fault_caught(fault: str) -> bool:
    return all(_verdicts(fault, values)[0] is not None for values in q.VALUES)


@pytest.mark.parametrize("values", q.VALUES)
@pytest.mark.parametrize("fault", FAULTS)
def test_scaled_mm_quality_fault_is_caught(fault, values):
    assert _verdicts(None, values) == (None, None)  # the honest stand-in passes both
    caught, _ = _verdicts(fault, values)
    assert caught is not None, f"{fault} ({values}) passed the bound"


@pytest.mark.parametrize("values", q.VALUES)
@pytest.mark.parametrize("fault", MISSED_BEFORE)
def test_deepgemms_acceptance_missed_what_the_bound_catches(fault, values):
    caught, before = _verdicts(fault, values)
    assert before is None and caught is not None, (fault, values, before, caught)
