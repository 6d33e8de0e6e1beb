"""torch._scaled_mm on the GPU against fp8ref's dequantized reference: tensorwise, rowwise,
blockwise (1x128 activations, 128x128 weights) on sm90, MX on sm100; fast
accumulation on and off. Judged by DeepGEMM's calc_diff (< 1e-3) and SQNR (>= 25 dB) against
the exact product of the FP8 values (float64), which is what the kernel approximates."""

import pytest
import torch

from fp8ref.harness.stack import probes
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.metrics import calc_diff, sqnr
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import axiswise, block, mx, tensorwise, tile

pytestmark = pytest.mark.sm(89, "FP8 tensor cores")


def _shape(dry_run):
    return (128, 256, 128) if dry_run else (1024, 2048, 1536)


def _operands(a_g, b_g, dry_run, device):
    m, k, n = _shape(dry_run)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen) * 4
    b = torch.randn(n, k, generator=gen) / 8
    qa, qb = quantize(a, E4M3FN, a_g), quantize(b, E4M3FN, b_g)
    A = qa.codes.view(torch.float8_e4m3fn).to(device)
    B = qb.codes.view(torch.float8_e4m3fn).to(device).t()  # column-major, as cuBLAS wants
    ref = qa.dequantize(torch.float64) @ qb.dequantize(torch.float64).t()
    return qa, qb, A, B, ref


def _check(out, ref, what):
    out = out.double().cpu()
    d, db = calc_diff(out, ref), sqnr(out, ref)
    assert d < 1e-3 and db >= 25, f"{what}: calc_diff {d:.2e}, SQNR {db:.1f} dB"


@pytest.mark.parametrize("fast_accum", [False, True], ids=["exact-accum", "fast-accum"])
@pytest.mark.parametrize("gran", ["tensorwise", pytest.param("rowwise", marks=pytest.mark.sm(90, "rowwise scaled_mm"))])
def test_scaled_mm_on_device_matches_the_reference(gran, fast_accum, gpu_device, dry_run, skip_unless):
    skip_unless(probes.scaled_mm_refusal(gran, torch.bfloat16, gpu_device), f"{gran} torch._scaled_mm on {gpu_device}")
    g = tensorwise() if gran == "tensorwise" else axiswise(-1)
    qa, qb, A, B, ref = _operands(g, g, dry_run, gpu_device)
    sa, sb = (1 / qa.scale).to(gpu_device), (1 / qb.scale).to(gpu_device)
    if gran == "rowwise":
        sb = sb.t()
    out = torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)
    _check(out, ref, f"{gran} fast_accum={fast_accum} on {gpu_device}")


@pytest.mark.sm(90, "blockwise scaled_mm: cuBLAS has 1x128/128x128 scaling on sm90 only", only=True)
def test_blockwise_scaled_mm_matches_the_reference(gpu_device, dry_run, skip_unless):
    """DeepSeek-V3 blockwise: 1x128 tiles for A, 128x128 blocks for B. The layouts are the ones
    torch's ScaledBlas.cpp checks: A's scale (M, K/128) outer-dim-major (strides (1, M)), B's
    (K/128, N/128) with strides (1, K/128). Only a refusal of the minimal call skips; an error
    from this call is a failure."""
    skip_unless(
        probes.scaled_mm_refusal("blockwise", torch.bfloat16, gpu_device), f"blockwise torch._scaled_mm on {gpu_device}"
    )
    qa, qb, A, B, ref = _operands(tile(128), block(128), dry_run, gpu_device)
    sa = (1 / qa.scale).to(gpu_device).t().contiguous().t()  # (M, K/128), strides (1, M)
    sb = (1 / qb.scale).to(gpu_device).t()  # (K/128, N/128), strides (1, K/128)
    assert sa.stride() == (1, sa.shape[0]) and sb.stride() == (1, sb.shape[0])
    out = torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    _check(out, ref, "blockwise")


@pytest.mark.sm(100, "MX scaled_mm")
@pytest.mark.needs("torchao")
def test_mx_scaled_mm_matches_the_reference(gpu_device, dry_run, skip_unless):
    """MXFP8 through _scaled_mm takes E8M0 scales in cuBLAS's swizzled layout; fp8ref builds
    the naive layout, and torchao's to_blocked swizzles it."""
    from torchao.prototype.mx_formats.utils import to_blocked

    skip_unless(probes.scaled_mm_refusal("mx", torch.bfloat16, gpu_device), f"mx torch._scaled_mm on {gpu_device}")
    qa, qb, A, B, ref = _operands(mx(32), mx(32), dry_run, gpu_device)
    sa = to_blocked(qa.scale_e8m0.view(torch.float8_e8m0fnu)).to(gpu_device)
    sb = to_blocked(qb.scale_e8m0.view(torch.float8_e8m0fnu)).to(gpu_device)
    out = torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    _check(out, ref, "mxfp8")
