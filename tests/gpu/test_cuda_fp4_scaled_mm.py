"""torch._scaled_mm with FP4 operands on Blackwell: MXFP4 (E8M0 per 1x32) and NVFP4 (E4M3 per 1x16,
single level, and two level with the per-tensor scales applied to the output as torchao does)
against the exact product of the operands fp8ref's reference quantized (tests/fp4_gemm_checks.py).
Block-scaled FP4 tensor cores exist from sm100 on."""

import pytest
import torch

from fp8ref.harness import probes
from tests.fp4_gemm_checks import CASES, excess

pytestmark = pytest.mark.sm(100, "FP4 block-scaled tensor cores")


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("kind,two_level", CASES, ids=[f"{k}{'-two' if t else ''}" for k, t in CASES])
def test_fp4_scaled_mm_matches_the_exact_product(kind, two_level, out_dtype, gpu_device, skip_unless):
    skip_unless(
        probes.scaled_mm_scaling(kind, out_dtype, gpu_device), f"{kind} torch._scaled_mm to {out_dtype} on {gpu_device}"
    )
    problem = excess(kind, two_level, out_dtype, gpu_device)
    assert problem is None, problem
