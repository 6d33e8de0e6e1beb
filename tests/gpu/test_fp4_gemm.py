"""FP4 GEMMs (torch._scaled_mm or F.scaled_mm) on Blackwell: MXFP4 (E8M0 per 1x32) and NVFP4 (E4M3 per 1x16,
single level, and two level with the per-tensor scales applied to the output as torchao does)
against the exact product of the operands fp8ref's reference quantized (fp8ref/harness/gemm/fp4_gemm_bound.py).
Block-scaled FP4 tensor cores exist from sm100 on."""

import pytest
import torch

from fp8ref.harness.gemm.fp4_gemm_bound import CASES, excess
from fp8ref.harness.stack import probes

pytestmark = pytest.mark.sm(100, "FP4 block-scaled tensor cores")


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("kind,two_level", CASES, ids=[f"{k}{'-two' if t else ''}" for k, t in CASES])
def test_fp4_scaled_mm_matches_the_exact_product(kind, two_level, out_dtype, gpu_device, skip_if_refused):
    """Through the API this install accepts for the kind (F.scaled_mm, or torch._scaled_mm:
    ``probes.fp4_gemm_api``); skips only when every API refuses the minimal call."""
    skip_if_refused(
        probes.fp4_gemm_refusal(kind, out_dtype, gpu_device), f"{kind} FP4 GEMMs to {out_dtype} on {gpu_device}"
    )
    api = probes.fp4_gemm_api(kind, out_dtype, gpu_device)
    problem = excess(kind, two_level, out_dtype, gpu_device, api=api)
    assert problem is None, f"through {api}: {problem}"
