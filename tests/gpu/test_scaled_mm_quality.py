"""torch._scaled_mm on the GPU against the exact product of the FP8 values and scales it is given:
tensorwise, rowwise, blockwise (1x128 activations, 128x128 weights) on sm90, MX on sm100; fast
accumulation on and off; on gaussian operands quantized as training casts them and on operands
whose partial sums are exact in any accumulator. Every output is held to a bound derived from the
output format and the device's measured accumulator (fp8ref/harness/gemm/scaled_mm_quality.py says how);
DeepGEMM's calc_diff and the SQNR are recorded beside it."""

import pytest
import torch

from fp8ref.harness.gemm import scaled_mm_quality as q
from fp8ref.harness.stack import probes

pytestmark = pytest.mark.sm(89, "FP8 tensor cores")


def _shape(values: str, dry_run: bool) -> tuple[int, int, int]:
    if dry_run:
        return (128, 256, 128)
    return (1024, 2048, 1536) if values == "gaussian" else (1024, 1024, 1536)  # (exact sums: K <= 1024)


def _check(scaling, values, fast_accum, device, dry_run, record_observation):
    c = q.case(scaling, values, _shape(values, dry_run), device)
    out = q.run(c, torch.bfloat16, fast_accum)
    d, db = q.deepgemm_metrics(c, out)
    record_observation(
        f"_scaled_mm {scaling} {values} fast_accum={fast_accum} on {device}: calc_diff / SQNR", f"{d:.2e} / {db:.1f} dB"
    )
    problem = q.bound_problem(c, out, device, fast_accum)
    assert problem is None, problem


@pytest.mark.parametrize("values", q.VALUES)
@pytest.mark.parametrize("fast_accum", [False, True], ids=["exact-accum", "fast-accum"])
@pytest.mark.parametrize("gran", ["tensorwise", pytest.param("rowwise", marks=pytest.mark.sm(90, "rowwise scaled_mm"))])
def test_scaled_mm_on_device_matches_the_reference(
    gran, fast_accum, values, gpu_device, dry_run, skip_if_refused, record_observation
):
    skip_if_refused(
        probes.scaled_mm_refusal(gran, torch.bfloat16, gpu_device), f"{gran} torch._scaled_mm on {gpu_device}"
    )
    _check(gran, values, fast_accum, gpu_device, dry_run, record_observation)


@pytest.mark.parametrize("values", q.VALUES)
@pytest.mark.sm(90, "blockwise scaled_mm: cuBLAS has 1x128/128x128 scaling on sm90 only", only=True)
def test_blockwise_scaled_mm_matches_the_reference(values, gpu_device, dry_run, skip_if_refused, record_observation):
    """DeepSeek-V3 blockwise: 1x128 tiles for A, 128x128 blocks for B, in the scale layouts torch's
    ScaledBlas.cpp checks. Only a refusal of the minimal call skips; an error from this call is a
    failure."""
    skip_if_refused(
        probes.scaled_mm_refusal("blockwise", torch.bfloat16, gpu_device), f"blockwise torch._scaled_mm on {gpu_device}"
    )
    _check("blockwise", values, False, gpu_device, dry_run, record_observation)


@pytest.mark.parametrize("values", q.VALUES)
@pytest.mark.sm(100, "MX scaled_mm")
@pytest.mark.needs("torchao")
def test_mx_scaled_mm_matches_the_reference(values, gpu_device, dry_run, skip_if_refused, record_observation):
    """MXFP8 through _scaled_mm takes E8M0 scales in cuBLAS's swizzled layout; torchao's to_blocked
    swizzles fp8ref's."""
    skip_if_refused(probes.scaled_mm_refusal("mx", torch.bfloat16, gpu_device), f"mx torch._scaled_mm on {gpu_device}")
    _check("mx", values, False, gpu_device, dry_run, record_observation)
