"""torch's block-scaled FP4 GEMM (MXFP4, NVFP4) fed from fp8ref's codes (harness, not reference).

``torch._scaled_mm`` takes FP4 operands as ``float4_e2m1fn_x2`` (two codes per byte, the even
element in the low nibble: ``codec.pack_fp4``), A (M, K/2) row-major and B (K/2, N) column-major,
and block scales in cuBLAS's "block scaling factors layout" (``to_blocked``): E8M0 per 1x32 for
MXFP4, E4M3 per 1x16 for NVFP4. NVFP4's per-tensor scales are not an argument of the kernel;
torchao (``nvfp4_tensor._addmm_nvfp4_dispatch``, v0.18) multiplies the output by their product
afterwards, and so does ``scaled_mm``.

Two APIs reach the kernel (``APIS``): ``torch._scaled_mm`` (torch runs MXFP4 through it on ROCm
only, NVFP4 on CUDA too) and ``torch.nn.functional.scaled_mm``, where the scaling (1x32 or 1x16
block-wise) and the scales' 32-4-4 swizzle are named arguments; torchao 0.16-0.18 sends MXFP4
through the latter (``mx_tensor.py``). ``fp8ref.harness.stack.probes.fp4_gemm_api`` says which one an
install accepts.
"""

from __future__ import annotations

import dataclasses

import torch

from ...reference.codec import encode, pack_fp4
from ...reference.formats import E8M0FNU, UE4M3, FloatFormat
from ...reference.validate import one_of, tensor
from ..stack.refusals import call

__all__ = [
    "Fp4Kind",
    "KINDS",
    "FP4_KINDS",
    "kind_row",
    "APIS",
    "call_packed",
    "to_blocked",
    "unit_scales",
    "blocked_scales",
    "scaled_mm",
]


@dataclasses.dataclass(frozen=True)
class Fp4Kind:
    """One block-scaled FP4 GEMM kind: E2M1 elements, ``block`` of them per scale."""

    name: str
    block: int  # elements per block scale
    scale_format: FloatFormat  # the block scale's format
    scale_dtype: str  # the dtype torch's kernel reads the scale bytes as (UE4M3 travels as float8_e4m3fn)
    f_scaling: str  # its torch.nn.functional.ScalingType member


KINDS = {
    k.name: k
    for k in (
        Fp4Kind("mxfp4", 32, E8M0FNU, "float8_e8m0fnu", "BlockWise1x32"),
        Fp4Kind("nvfp4", 16, UE4M3, "float8_e4m3fn", "BlockWise1x16"),
    )
}
FP4_KINDS = tuple(KINDS)
APIS = ("F.scaled_mm", "torch._scaled_mm")  # in the order fp8ref prefers them


def kind_row(kind: str) -> Fp4Kind:
    """The row of ``KINDS`` for a kind's name (a ValueError naming the kinds otherwise)."""
    return KINDS[one_of(kind, FP4_KINDS, "kind")]


def to_blocked(scales: torch.Tensor) -> torch.Tensor:
    """(rows, cols) block scales -> cuBLAS's 1D block-scaling-factor layout, flattened.

    From the cuBLAS documentation ("1D Block Scaling Factors Layout"): pad to multiples of 128
    rows and 4 columns (zeros), cut into 128 x 4 tiles stored one after another (tile row
    major), and inside a tile put the scale of (row r, column c) at byte ``(r % 32) * 16 +
    (r // 32) * 4 + c``."""
    tensor(scales, "scales")
    if scales.dim() != 2:
        raise ValueError(f"scales: expected a 2-d tensor, got shape {tuple(scales.shape)}")
    rows, cols = scales.shape
    pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
    padded = torch.zeros(pr, pc, dtype=scales.dtype, device=scales.device)
    padded[:rows, :cols] = scales
    r = torch.arange(pr, device=scales.device).view(-1, 1)
    c = torch.arange(pc, device=scales.device).view(1, -1)
    tile = (r // 128) * (pc // 4) + c // 4
    inner = (r % 128 % 32) * 16 + (r % 128 // 32) * 4 + c % 4
    out = torch.empty(pr * pc, dtype=scales.dtype, device=scales.device)
    out[(tile * 512 + inner).reshape(-1)] = padded.reshape(-1)
    return out


def unit_scales(kind: str, rows: int, k: int) -> torch.Tensor:
    """(rows, k / block) block scale codes of 1.0 in ``kind``'s scale format."""
    row = kind_row(kind)
    return encode(torch.ones(rows, k // row.block), row.scale_format)


def blocked_scales(kind: str, scale_codes: torch.Tensor, device: str) -> torch.Tensor:
    """(rows, k / block) scale codes as ``torch._scaled_mm`` takes them: cuBLAS's layout, viewed
    as the kernel's scale dtype, on ``device``."""
    return to_blocked(scale_codes).view(getattr(torch, kind_row(kind).scale_dtype)).to(device)


def scaled_mm(
    kind: str,
    a_codes: torch.Tensor,
    a_scale: torch.Tensor,
    b_codes: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    device: str = "cuda",
    tensor_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
    api: str = "torch._scaled_mm",
) -> torch.Tensor:
    """``A @ B^T`` on ``device`` by ``torch._scaled_mm`` from E2M1 codes (uint8, one per byte):
    ``a_codes`` (M, K), ``b_codes`` (N, K); block scale codes ``a_scale`` (M, K/bs) and
    ``b_scale`` (N, K/bs) (E8M0 for mxfp4, UE4M3 bytes for nvfp4); ``tensor_scales`` (nvfp4 two
    level): the output is multiplied by their product, in ``out_dtype``, as torchao does.
    ``api``: which of ``APIS`` calls the kernel."""
    bs = kind_row(kind).block
    one_of(api, APIS, "api")
    for name, t in (("a_codes", a_codes), ("a_scale", a_scale), ("b_codes", b_codes), ("b_scale", b_scale)):
        tensor(t, name, dtypes=(torch.uint8,))
    (m, k), (n, k2) = a_codes.shape, b_codes.shape
    if k != k2 or k % bs or a_scale.shape != (m, k // bs) or b_scale.shape != (n, k // bs):
        raise ValueError(
            f"a_codes {tuple(a_codes.shape)}, b_codes {tuple(b_codes.shape)}, a_scale "
            f"{tuple(a_scale.shape)}, b_scale {tuple(b_scale.shape)}: expected (M, K), (N, K), "
            f"(M, K/{bs}), (N, K/{bs})"
        )
    x2 = torch.float4_e2m1fn_x2
    a = pack_fp4(a_codes).view(x2).to(device)
    b = pack_fp4(b_codes).view(x2).to(device).t()
    sa, sb = blocked_scales(kind, a_scale, device), blocked_scales(kind, b_scale, device)
    out = call_packed(api, kind, a, b, sa, sb, out_dtype)
    if tensor_scales is not None:
        ga, gb = (t.to(device=device, dtype=torch.float32) for t in tensor_scales)
        out = out * (ga * gb).to(out_dtype)
    return out


def call_packed(
    api: str, kind: str, a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    """The kernel call alone, through ``api``: ``a`` (M, K/2) and ``b`` (K/2, N) packed
    ``float4_e2m1fn_x2`` on the device, ``sa``/``sb`` from ``blocked_scales`` (a benchmark
    prepares them once, outside its timed calls)."""
    if api == "torch._scaled_mm":
        return call("torch._scaled_mm", a, b, sa, sb, out_dtype=out_dtype)  # (refusals.call: its limit counts)
    import torch.nn.functional as F  # (a torch without F.scaled_mm refuses: AttributeError)

    recipe = getattr(F.ScalingType, kind_row(kind).f_scaling)
    swizzle = F.SwizzleType.SWIZZLE_32_4_4  # cuBLAS's layout, which blocked_scales builds
    return call(
        "torch.nn.functional.scaled_mm",
        a,
        b,
        scale_a=sa,
        scale_recipe_a=recipe,
        scale_b=sb,
        scale_recipe_b=recipe,
        swizzle_a=swizzle,
        swizzle_b=swizzle,
        output_dtype=out_dtype,
    )
