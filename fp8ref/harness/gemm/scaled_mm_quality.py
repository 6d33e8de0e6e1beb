"""``torch._scaled_mm`` held to the exact product of the FP8 values and scales it is given, at
realistic sizes, for tensorwise, rowwise, blockwise (1x128 activations, 128x128 weights) and MX
scales: the check of tests/gpu/test_scaled_mm_quality.py, and of tests/meta on the CPU's stand-ins.

Two kinds of operand:
- ``gaussian``: x ~ N(0, 4^2) and w ~ N(0, 1/8^2) quantized to E4M3 by fp8ref (``quantize``), as
  training casts them;
- ``exact-sums``: codes of the small integers -2..2 under scales spread over 2^-8 .. 2^8 (float32,
  not powers of two; E8M0 for MX): every partial sum of a K block is an integer of at most 2^12,
  exact in any FP8 accumulator (Hopper's keeps about 13-14 bits within an instruction), so only
  the scales' and the output's roundings remain, on every GPU generation
  (``gemm_probes.reference_bound(accum_bits=None)``'s reasoning).

The bound, elementwise, with ``ref`` the product of the operands' values (codes times the scales
as passed) in float64 and ``m`` the same product of magnitudes:

    |out - ref| <= u |ref| + (1 + u) c m

u: half an ulp of the output dtype (its one rounding, ``gemm_probes.half_ulp``); c: the GEMM's
accumulation term (``accumulation``). On the CPU, torch's ``_scaled_mm`` scales the operands to
float32 and multiplies in float32: c = (K + 3) 2^-24. On a GPU, c comes from the documented FP8
accumulator (``documented_accumulator``: the least documented width within a K block, 13 bits, no
promotion with fast accumulation and promotion within ``PROMOTION_K`` products without it; MX as
fast accumulation), never from a probe of the device under test, through
``gemm_probes.accumulation_bound``; a scaling with K blocks (blockwise) applies each block's scale
to its partial sum, so it sums at most one block narrowly and adds two float32 roundings per block;
with exact-sum operands the narrow sums are exact and c = (K blocks + 3) 2^-24 (MX: its K / 32
scaled block sums added at the accumulator's width). A correct kernel cannot exceed the bound;
a dropped or transposed scale, scales rounded through bfloat16, or the output rounded the wrong
way (toward zero, twice) do wherever the accumulation term is small next to u|ref|: on the CPU,
and for exact-sum operands on every device.

DeepGEMM's acceptance (calc_diff < 1e-3, and SQNR >= 25 dB) is what this check replaced: a
correct kernel scores about 53 dB, so it allowed about 700 times the error power a correct one
needs; ``deepgemm_problem`` is kept for the record and for tests/meta, which shows faults it
passes and the bound does not.
"""

from __future__ import annotations

import dataclasses

import torch

from ...reference.codec import decode, encode
from ...reference.formats import E4M3FN, E8M0FNU
from ...reference.metrics import calc_diff, sqnr
from ...reference.quantize import quantize
from ...reference.scaling import Granularity, axiswise, block, expand_scale, mx, tensorwise, tile
from .documented_accumulator import FLOAT32_BITS, gpu_accumulator
from .gemm_probes import accumulation_bound, half_ulp

SCALINGS = ("tensorwise", "rowwise", "blockwise", "mx")
VALUES = ("gaussian", "exact-sums")
_EXACT_MAX_K = 1024  # |codes| <= 2: partial sums of up to 1024 products stay integers of at most 2^12

# (A's granularity, B's granularity, the K block each scale covers: None for one along all of K)
_GRANULARITY: dict[str, tuple[Granularity, Granularity, int | None]] = {
    "tensorwise": (tensorwise(), tensorwise(), None),
    "rowwise": (axiswise(-1), axiswise(-1), None),
    "blockwise": (tile(128), block(128), 128),
    "mx": (mx(32), mx(32), 32),
}


@dataclasses.dataclass
class Case:
    """One GEMM as ``_scaled_mm`` is called (A (M, K) row-major, B (K, N) column-major, the scales
    in the layout the scaling takes) and the operands' values in float64 on the CPU: ``va`` (M, K)
    and ``vb`` (N, K), codes times their scales."""

    scaling: str
    values: str
    A: torch.Tensor
    B: torch.Tensor
    scale_a: torch.Tensor
    scale_b: torch.Tensor
    va: torch.Tensor
    vb: torch.Tensor

    @property
    def k(self) -> int:
        return self.va.shape[1]


def _scale_args(scaling: str, mult_a: torch.Tensor, mult_b: torch.Tensor, device: str) -> tuple[torch.Tensor, ...]:
    """The per-group multipliers (A: one per group of A (M, K); B: of B^T (N, K)) as ``_scaled_mm``
    takes them: tensorwise 0-d; rowwise (M, 1) and (1, N); blockwise (M, K/128) with strides (1, M)
    and (K/128, N/128) with strides (1, K/128), as torch's ScaledBlas.cpp checks them; MX E8M0 in
    cuBLAS's swizzled layout (torchao's ``to_blocked``)."""
    if scaling == "tensorwise":
        return mult_a.reshape(()).to(device), mult_b.reshape(()).to(device)
    if scaling == "rowwise":
        return mult_a.to(device), mult_b.to(device).t()
    if scaling == "blockwise":
        return mult_a.to(device).t().contiguous().t(), mult_b.to(device).t()
    from torchao.prototype.mx_formats.utils import to_blocked

    e8m0 = [encode(mult, E8M0FNU).view(torch.float8_e8m0fnu) for mult in (mult_a, mult_b)]
    return tuple(to_blocked(codes).to(device) for codes in e8m0)


def case(scaling: str, values: str, shape: tuple[int, int, int], device: str, seed: int = 0) -> Case:
    """The operands of one check (module docstring), M x K x N = ``shape``, on ``device``."""
    if scaling not in SCALINGS or values not in VALUES:
        raise ValueError(f"scaling, values: expected one of {SCALINGS}, {VALUES}; got {scaling!r}, {values!r}")
    m, k, n = shape
    g_a, g_b, _ = _GRANULARITY[scaling]
    gen = torch.Generator().manual_seed(seed)
    if values == "gaussian":
        qa = quantize(torch.randn(m, k, generator=gen) * 4, E4M3FN, g_a)
        qb = quantize(torch.randn(n, k, generator=gen) / 8, E4M3FN, g_b)
        codes_a, codes_b = qa.codes, qb.codes
        mult_a, mult_b = 1 / qa.scale, 1 / qb.scale  # float32: what the kernel multiplies by
    else:
        if k > _EXACT_MAX_K:
            raise ValueError(f"shape: exact sums need K <= {_EXACT_MAX_K}, got {k}")
        codes_a = encode(torch.randint(-2, 3, (m, k), generator=gen).float(), E4M3FN)
        codes_b = encode(torch.randint(-2, 3, (n, k), generator=gen).float(), E4M3FN)
        mult_a, mult_b = (_spread(g, s, gen, scaling == "mx") for g, s in ((g_a, (m, k)), (g_b, (n, k))))
    va = decode(codes_a, E4M3FN).double() * expand_scale(mult_a, g_a, torch.Size((m, k))).double()
    vb = decode(codes_b, E4M3FN).double() * expand_scale(mult_b, g_b, torch.Size((n, k))).double()
    e4m3 = torch.float8_e4m3fn
    A = codes_a.view(e4m3).to(device)
    B = codes_b.view(e4m3).to(device).t()  # column-major, as cuBLAS wants
    sa, sb = _scale_args(scaling, mult_a, mult_b, device)
    return Case(scaling, values, A, B, sa, sb, va, vb)


def _spread(g: Granularity, shape: tuple[int, int], gen: torch.Generator, pow2: bool) -> torch.Tensor:
    """One float32 multiplier per group of ``g`` over ``shape``, spread over 2^-8 .. 2^8 (powers of
    two for MX's E8M0, arbitrary float32 values otherwise)."""
    from ...reference.scaling import scale_shape

    e = torch.rand(scale_shape(g, torch.Size(shape)), generator=gen) * 16 - 8
    return torch.exp2(e.floor() if pow2 else e).float()


def run(c: Case, out_dtype: torch.dtype = torch.bfloat16, fast_accum: bool = False) -> torch.Tensor:
    return torch._scaled_mm(
        c.A, c.B, scale_a=c.scale_a, scale_b=c.scale_b, out_dtype=out_dtype, use_fast_accum=fast_accum
    )


def accumulation(c: Case, device: str, fast_accum: bool) -> float:
    """The accumulation term c of the bound (module docstring), relative to the magnitude sum."""
    k = c.k
    if torch.device(device).type == "cpu":
        return (k + 3) * 2.0**-24  # float32 operands scaled once each, a float32 GEMM
    blk = _GRANULARITY[c.scaling][2]
    # the documented accumulator (documented_accumulator), never this device's probe; MX runs other
    # instructions, whose promotion nothing documents: fast accumulation's (none) for it
    within, interval = gpu_accumulator(None if c.scaling == "mx" else fast_accum)
    if c.values == "exact-sums":
        if c.scaling == "mx":
            return (k // 32) * 2.0 ** -(min(within, FLOAT32_BITS) + 1) + 3 * 2.0**-24
        return ((k // blk if blk else 1) + 3) * 2.0**-24
    if blk is not None and c.scaling == "blockwise":  # each block's scale applied to its partial sum
        return accumulation_bound(k, within, blk if interval is None else min(interval, blk)) + 2 * 2.0**-24
    return accumulation_bound(k, within, interval)


def bound_problem(c: Case, out: torch.Tensor, device: str, fast_accum: bool) -> str | None:
    """None when every element of ``out`` is within the bound, else a line: the scaling, the
    operands, how many elements exceed it, and the worst one's index, exact value and answer."""
    ref = c.va @ c.vb.t()
    mag = c.va.abs() @ c.vb.abs().t()
    u = half_ulp(out.dtype)
    acc = accumulation(c, device, fast_accum)
    got = out.double().cpu()
    excess = (got - ref).abs() - (u * ref.abs() + (1 + u) * acc * mag)
    if bool((excess <= 0).all()):
        return None
    worst = int(excess.argmax())
    i, j = divmod(worst, ref.shape[1])
    return (
        f"{c.scaling} ({c.values}, K={c.k}, fast_accum={fast_accum}) on {device}: {int((excess > 0).sum())} of "
        f"{ref.numel()} outputs outside |out - ref| <= u|ref| + (1 + u) c m (u {u:.3g}, c {acc:.3g}); "
        f"worst at [{i}, {j}]: exact {ref[i, j].item():.9g}, got {got[i, j].item():.9g}"
    )


def deepgemm_metrics(c: Case, out: torch.Tensor) -> tuple[float, float]:
    """(calc_diff, SQNR in dB) of ``out`` against the exact product."""
    ref, got = c.va @ c.vb.t(), out.double().cpu()
    return calc_diff(got, ref), sqnr(got, ref)


def deepgemm_problem(c: Case, out: torch.Tensor) -> str | None:
    """The acceptance this check replaced: DeepGEMM's calc_diff < 1e-3 and SQNR >= 25 dB."""
    d, db = deepgemm_metrics(c, out)
    return None if d < 1e-3 and db >= 25 else f"calc_diff {d:.2e}, SQNR {db:.1f} dB"


def check(scaling: str, values: str, fast_accum: bool, device: str, shape: tuple[int, int, int]) -> str | None:
    """``run`` one ``case`` to bfloat16 and hold it to the bound: None, or what differs."""
    c = case(scaling, values, shape, device)
    return bound_problem(c, run(c, torch.bfloat16, fast_accum), device, fast_accum)
