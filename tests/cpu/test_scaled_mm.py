"""torch._scaled_mm on this device against the dequantized matmul, and what it enforces."""

import pytest
import torch

from fp8ref import install
from fp8ref.formats import E4M3FN
from fp8ref.quantize import quantize
from fp8ref.scaling import axiswise, tensorwise

U_OUT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}  # half an ulp, relative


def _mm_operands(g, seed=0, M=64, K=128, N=48):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen) * 3
    b = torch.randn(N, K, generator=gen) / 3
    return quantize(a, E4M3FN, g), quantize(b, E4M3FN, g)


@pytest.mark.parametrize("fast_accum", [False, True], ids=["exact-accum", "fast-accum"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("g", [tensorwise(), axiswise(-1)], ids=["tensorwise", "rowwise"])
def test_scaled_mm_matches_the_dequantized_matmul(g, out_dtype, fast_accum, skip_unless):
    scaling = "rowwise" if g.kind == "axiswise" else "tensorwise"
    skip_unless(install.scaled_mm(scaling, out_dtype), f"{scaling} torch._scaled_mm to {out_dtype} on cpu")
    qa, qb = _mm_operands(g)
    inv_a, inv_b = 1 / qa.scale, 1 / qb.scale
    if g.kind == "axiswise":
        inv_b = inv_b.t()  # (1, N)
    out = torch._scaled_mm(qa.codes.view(torch.float8_e4m3fn), qb.codes.view(torch.float8_e4m3fn).t(),
                           scale_a=inv_a, scale_b=inv_b, out_dtype=out_dtype, use_fast_accum=fast_accum)
    va, vb = qa.values().double(), qb.values().double()
    ref = (va @ vb.t()) * inv_a.double() * inv_b.double()
    # products of two E4M3 values are exact; float32 accumulation of K terms errs by at most
    # K * 2^-24 * sum|a b| (any order), the scales add two float32 roundings, and the output
    # rounds once to out_dtype
    K = va.shape[1]
    mag = (va.abs() @ vb.abs().t()) * (inv_a.double() * inv_b.double()).abs()
    bound = U_OUT[out_dtype] * ref.abs() + (K + 3) * 2.0**-24 * mag
    err = (out.double() - ref).abs()
    assert out.dtype == out_dtype
    assert bool((err <= bound).all()), f"max excess {(err - bound).max().item():.3e}"


def test_scaled_mm_requirements_on_this_device(record_observation):
    """What _scaled_mm enforces here (cuBLAS on GPU wants row-major x column-major and dims that
    are multiples of 16; the CPU path is observed). Reported, and 1-D scales must be refused."""
    qa, qb = _mm_operands(tensorwise())
    A, B = qa.codes.view(torch.float8_e4m3fn), qb.codes.view(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    seen = {}
    for name, aa, bb in [
        ("row-major x row-major", A, B.t().contiguous()),
        ("K not a multiple of 16", A[:, :120], B[:, :120].t()),
        ("M not a multiple of 16", A[:60], B.t()),
    ]:
        try:
            torch._scaled_mm(aa, bb, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            seen[name] = "accepted"
        except (RuntimeError, ValueError) as exc:
            seen[name] = f"refused ({type(exc).__name__})"
    record_observation(
        f"_scaled_mm on cpu (torch {torch.__version__})", "; ".join(f"{k}: {v}" for k, v in seen.items())
    )
    with pytest.raises((RuntimeError, ValueError)):
        torch._scaled_mm(
            A, B.t(), scale_a=torch.ones(A.shape[0]), scale_b=torch.ones(B.shape[0]), out_dtype=torch.bfloat16
        )
