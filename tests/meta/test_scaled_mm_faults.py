"""``_scaled_mm``: a stand-in that divides by its scales, or accumulates in bfloat16.

Deliberately broken stand-ins run through the same checks the suite holds torch and torchao to;
each must be reported (a fault that passes means a check went blind). ``test_catch_rate.py`` runs
every family again for the catch rate printed at the end of the run."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fp8ref.harness.gemm import scaled_mm_regressions

# --- _scaled_mm, through fp8ref/harness/gemm/scaled_mm_regressions.excess -------------------------------------------
# faults of fp8ref/harness/gemm/scaled_mm_regressions.stand_in: bfloat16 keeps 7 mantissa bits of its partial sums
MM_FAULTS: dict[str, dict[str, Any]] = {
    "divides by its scales": {"scales_inverted": True},
    "accumulates in bfloat16": {"keep_bits": 7},
}


def scaled_mm_excess(fault: str | None) -> str | None:
    c = scaled_mm_regressions.case(32, 64, 48, "rowwise", "cpu")
    real = torch._scaled_mm
    torch._scaled_mm = scaled_mm_regressions.stand_in(**({} if fault is None else MM_FAULTS[fault]))
    try:
        return scaled_mm_regressions.excess(c, scaled_mm_regressions.run(c, torch.float32), torch.float32)
    finally:
        torch._scaled_mm = real


@pytest.mark.parametrize("fault", list(MM_FAULTS))
def test_scaled_mm_fault_is_caught(fault):
    assert scaled_mm_excess(None) is None
    assert scaled_mm_excess(fault) is not None
