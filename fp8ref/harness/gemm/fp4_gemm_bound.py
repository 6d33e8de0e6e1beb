"""torch's block-scaled FP4 GEMM (MXFP4, NVFP4 single and two level) against the exact product of
its operands as fp8ref's reference quantized them. Used by the CUDA test (sm100) and, with a
float64 stand-in for torch._scaled_mm, by the CPU test that shows the check can fail."""

from __future__ import annotations

import torch

from ...reference import nvfp4
from ...reference.formats import E2M1FN
from ...reference.quantize import quantize
from ...reference.scaling import mx
from . import fp4_gemm
from .gemm_probes import half_ulp, reference_bound

CASES = [("mxfp4", False), ("nvfp4", False), ("nvfp4", True)]


def operands(kind: str, two_level: bool, m: int, k: int, n: int, seed: int = 0) -> dict:
    """Codes, block scale codes and (two level) tensor scales of A (M, K) and B (N, K), and their
    dequantized values in float64 without the tensor scales (``va``, ``vb``). Rows span 2^-6..2^6
    so the block scales differ."""
    gen = torch.Generator().manual_seed(seed)

    def make(rows: int) -> torch.Tensor:
        mag = torch.exp2(torch.randint(-6, 7, (rows, 1), generator=gen).float())
        return torch.randn(rows, k, generator=gen) * mag

    out = {}
    for name, x in (("a", make(m)), ("b", make(n))):
        if kind == "mxfp4":
            q = quantize(x, E2M1FN, mx(32))
            codes, scale, g = q.codes, q.scale_e8m0, None
            values = q.dequantize(torch.float64)
        else:
            n4 = nvfp4.quantize_current(x, "two" if two_level else "single")
            codes, scale, g = n4.codes, n4.block_scale, n4.tensor_scale
            single = nvfp4.Nvfp4Data(n4.codes, n4.block_scale, None, n4.orig_dtype)
            values = single.dequantize(torch.float64)
        out.update({f"{name}_codes": codes, f"{name}_scale": scale, f"g{name}": g, f"v{name}": values})
    return out


def excess(
    kind: str,
    two_level: bool,
    out_dtype: torch.dtype,
    device: str,
    m: int = 256,
    k: int = 512,
    n: int = 256,
    api: str = "torch._scaled_mm",
) -> str | None:
    """None when every output element is within the derived bound of the exact product (see
    ``gemm_probes.reference_bound``: 23-bit accumulation, one output rounding; the tensor scales
    are applied as one more scale pair), else a line naming the worst element."""
    ops = operands(kind, two_level, m, k, n)
    tensor_scales = (ops["ga"], ops["gb"]) if two_level else None
    out = fp4_gemm.scaled_mm(
        kind,
        ops["a_codes"],
        ops["a_scale"],
        ops["b_codes"],
        ops["b_scale"],
        out_dtype,
        device,
        tensor_scales=tensor_scales,
        api=api,
    )
    assert out.shape == (m, n) and out.dtype == out_dtype, f"out {tuple(out.shape)} {out.dtype}"
    one = torch.tensor(1.0, dtype=torch.float64)
    ga, gb = (ops["ga"].double(), ops["gb"].double()) if two_level else (one, one)
    ref, bound = reference_bound(ops["va"], ops["vb"].t(), ga, gb, out_dtype)
    if two_level:
        # the tensor scales' product rounds to float32 (2^-24) and to out_dtype, and the multiply
        # rounds once more (half an ulp each); 1% covers the second-order terms
        bound = bound + 1.01 * (2.0**-24 + 2 * half_ulp(out_dtype)) * ref.abs()
    err = (out.double().cpu() - ref).abs()
    bad = ~(err <= bound)
    if not bool(bad.any()):
        return None
    i, j = divmod(int(torch.argmax(torch.where(bad, err - bound, torch.zeros_like(err)).nan_to_num(1e300))), n)
    return (
        f"{kind}{' two-level' if two_level else ''}: {int(bad.sum())} of {bad.numel()} elements outside the "
        f"bound; worst [{i}, {j}]: got {out[i, j].item()!r}, exact {ref[i, j].item()!r}, bound {bound[i, j]:.3e}"
    )
