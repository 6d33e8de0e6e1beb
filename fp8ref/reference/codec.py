"""Spec-level FP8 encode / decode, written from the format definition alone.

``encode`` maps float32 / bfloat16 / float16 tensors to uint8 codes with round-to-nearest,
ties-to-even (IEEE 754 roundTiesToEven); ``decode`` maps codes back to float32.

Independence rule (docs/design.md): nothing in this module calls torch's native float8 cast, its
scaled FP8 matmul or torchao. The only torch used is integer arithmetic on the input's
float32 bit pattern and table look-ups.

How the rounding works (``_encode_exact``): a finite |x| in float32 is ``sig x 2^(ue - 23)``
with a 24-bit integer significand ``sig`` whose top bit is set (a float32 subnormal is normalised
first, so its ``ue`` is its true exponent, down to -149). The target keeps ``man_bits`` fraction bits at
exponent ``max(ue, emin)`` (below ``emin`` the format is subnormal), so we drop
``shift = 23 - man_bits + (max(ue, emin) - ue)`` low bits of ``sig`` with ties-to-even. The kept
quotient ``q`` still carries the implicit bit, so the magnitude code is
``((max(ue, emin) + bias - 1) << man_bits) + q``; a carry out of the mantissa bumps the exponent
field by itself. Overflow means that code is above the largest finite code: the value rounded
with an unbounded exponent range exceeds ``max`` (so for E4M3FN, 464 rounds to 448 and 465
overflows, as IEEE 754 defines overflow).

Special values (decided here; this docstring is the one statement of the rules):
- NaN -> the format's NaN (sign kept where the format has one; 0x80 for FNUZ, 0xFF for E8M0).
  Implementations pick different NaN payloads; conformance compares NaN-ness, not payload.
- ``saturate=False``: finite overflow and +-inf -> +-inf where the format has inf (E5M2), else NaN.
- ``saturate=True``: finite overflow and +-inf -> +-max (the OCP OFP8 saturating conversion).
- -0.0 -> 0x80 where the format has negative zero, else 0x00 (FNUZ formats have no -0).
- E8M0FNU has no sign and no zero: negative numbers, -0.0 and 0.0 -> NaN (0xFF); positive values
  below 2^-127 go to 2^-127 in every rounding mode (the only value the format has there).
  Its tie rule: a tie between two powers of two (1.5 x 2^e) rounds *up*, away from zero. Why: both
  neighbours have an empty (so even) mantissa, so IEEE 754's ties-to-even does not choose between
  them; rounding the significand half-up is what ties-to-even on the significand ``1.1`` does (the
  kept quotient, implicit bit included, is odd), what torch and ml_dtypes do, and what IEEE 754's
  roundTiesToAway gives. gfloat picks the neighbour with the even exponent field instead, a
  different reading of "even"; the suite leaves E8M0 ties out of its comparison with gfloat.
- FP4/FP6 (E2M1FN, E2M3FN, E3M2FN) have neither inf nor NaN: overflow and +-inf always go to
  +-max (the OCP MX conversion saturates; there is nothing else to write), -0.0 -> the -0 code,
  and NaN is refused with a ValueError (the spec leaves it to the implementation; the suite
  observes what each one does instead of choosing for it).
- UE4M3 (unsigned): negative values -> NaN (0x7F), -0.0 -> 0.

Rounding modes: ``rne`` (the default and the only one the table paths serve), ``rtz`` (drop the
bits; finite overflow gives max, as IEEE 754 rounds toward zero) and ``sr`` (stochastic). SR's
rule, by the definition: with ``lower <= |x| < upper`` the neighbours of |x| (``upper`` the value
one unit above ``lower``, past max when |x| is above max) and ``p = (|x| - lower) / (upper - lower)``,
the result goes up when a uniform 24-bit integer ``r`` satisfies ``r < p * 2^24``. So it goes up
with probability ``ceil(p * 2^24) / 2^24``: exactly ``p`` whenever ``p * 2^24`` is an integer,
which holds for every float16 input and every input at most ``man_bits + 1`` binades below the
smallest normal; a smaller non-zero input goes up with a probability rounded up to a multiple of
2^-24 (at least 2^-24).
Going up past max is an overflow, treated as RNE's. ``encode(..., random_bits=r)`` takes the
``r`` of each element instead of drawing them. RTZ and SR run the exact algorithm.

Packing (``pack_fp4``): two FP4 codes per byte, the even-indexed element in the low nibble.

The fast paths (``encode``): bfloat16/float16 inputs index a 65,536-entry table built by
``_encode_exact`` over every 16-bit pattern. float32 inputs are first rounded *to odd* into a
bfloat16 bit pattern (truncate to 16 bits, set the lowest bit if anything was cut off) and then
use the bfloat16 table. Round-to-odd into a format with at least two more significant bits than
the target makes the second rounding exact: RNE(x) == RNE(RO(x)) (Boldo & Melquiond, "When double
rounding is odd", 2008). bfloat16 keeps 8 significant bits, these formats at most 4, and both
share float32's exponent range, so subnormal targets are covered too. The tests check that the
fast and the exact paths agree.
"""

from __future__ import annotations

import functools

import torch

from .formats import FloatFormat, NanRule, get_format
from .validate import Choice, boolean, choice, instance, tensor

__all__ = [
    "Rounding",
    "encode",
    "decode",
    "decode_table",
    "round_to_format",
    "pack_fp4",
    "unpack_fp4",
    "SUPPORTED_INPUT_DTYPES",
]

SUPPORTED_INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class Rounding(Choice):
    """How a value between two neighbours of the format is rounded."""

    RNE = "rne"  # to nearest, ties to even (IEEE 754 roundTiesToEven)
    RTZ = "rtz"  # toward zero: never increases the magnitude
    SR = "sr"  # stochastic: up with probability (x - lower) / (upper - lower)


# --------------------------------------------------------------------------------------------
# decode
# --------------------------------------------------------------------------------------------
@functools.cache
def _decode_table_cpu(fmt: FloatFormat) -> torch.Tensor:
    return torch.tensor(fmt.all_values(), dtype=torch.float32)


def decode_table(fmt: str | FloatFormat, device: torch.device | str = "cpu") -> torch.Tensor:
    """float32 value of each code (index = code; 2^bits of them), from the bit definition."""
    fmt = get_format(fmt)
    return _decode_table_cpu(fmt).to(device)


def decode(codes: torch.Tensor, fmt: str | FloatFormat) -> torch.Tensor:
    """uint8 codes -> float32 values (exact: every value of these formats is a float32)."""
    fmt = get_format(fmt)
    tensor(codes, "codes", dtypes=(torch.uint8,))
    if fmt.bits < 8 and codes.numel() and int(codes.max()) >= fmt.n_codes:
        raise ValueError(
            f"codes: {fmt.name} codes are {fmt.bits}-bit (0..{fmt.n_codes - 1}), got a maximum of {int(codes.max())}"
        )
    flat = codes.reshape(-1).to(torch.int32)
    return torch.index_select(decode_table(fmt, codes.device), 0, flat).view(codes.shape)


# --------------------------------------------------------------------------------------------
# encode: the exact, element-wise-vectorized algorithm
# --------------------------------------------------------------------------------------------
_SR_BITS = 24  # random bits per stochastic rounding
_MAX_SHIFT = 2 * _SR_BITS


def _round_up(
    q: torch.Tensor, rem: torch.Tensor, shift: torch.Tensor, rounding: Rounding, rand: torch.Tensor | None
) -> torch.Tensor:
    """Whether to add one unit to the kept quotient ``q``, given the dropped bits ``rem`` (of
    ``shift`` bits). SR: ``rand`` holds uniform integers r in [0, 2^24); round up when
    r < (rem / 2^shift) * 2^24 (module docstring)."""
    if rounding == Rounding.RTZ:
        return torch.zeros_like(q, dtype=torch.bool)
    if rounding == Rounding.SR:
        assert rand is not None  # stochastic rounding is always given its random bits
        # r < (rem / 2^shift) * 2^24, in integers without overflow: r * 2^(shift - 24) < rem when
        # more than 24 bits are dropped, else r < rem * 2^(24 - shift)
        wide = shift > _SR_BITS
        return torch.where(
            wide,
            (rand << (shift - _SR_BITS).clamp(min=0)) < rem,
            rand < (rem << (_SR_BITS - shift).clamp(min=0)),
        )
    half = 1 << (shift - 1)
    return (rem > half) | ((rem == half) & ((q & 1) == 1))


def _encode_exact(
    x: torch.Tensor,
    fmt: FloatFormat,
    saturate: bool,
    rounding: Rounding = Rounding.RNE,
    rand: torch.Tensor | None = None,
) -> torch.Tensor:
    """float32 tensor -> uint8 codes by integer arithmetic on the float32 bits."""
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    sign = (bits >> 31) & 1
    a = bits & 0x7FFFFFFF
    is_nan = a > 0x7F800000
    is_inf = a == 0x7F800000
    e32 = a >> 23
    frac = a & 0x7FFFFF
    # x = sig * 2^(ue - 23) with a 24-bit significand whose top bit is set. A float32 subnormal
    # (frac * 2^-149) is normalised to its true exponent, below float32's -126: a format whose
    # smallest exponent is below -126 (E8M0: -127) rounds it on its own grid, not float32's.
    lead = torch.frexp(frac.to(torch.float64))[1].to(torch.int64) - 1  # top set bit of frac (exact)
    sig = torch.where(e32 > 0, frac | (1 << 23), frac << (23 - lead).clamp(0, 23))
    ue = torch.where(e32 > 0, e32 - 127, lead - 149)

    m = fmt.man_bits
    ue_c = ue.clamp(min=fmt.emin)
    # bits to drop. 25 or more drop everything (sig < 2^24): RNE and RTZ give 0 there, and SR's
    # rule reads the same for every shift >= 48, so the clamp keeps shifts in int64 range and
    # changes no result
    shift = (23 - m + (ue_c - ue)).clamp(max=_MAX_SHIFT)
    q = sig >> shift
    rem = sig & ((1 << shift) - 1)
    up = _round_up(q, rem, shift, rounding, None if rand is None else rand.reshape(q.shape).to(torch.int64))
    q = q + up.to(q.dtype)
    exp_base = fmt.emin + fmt.bias - (1 if fmt.has_subnormals else 0)
    # below emin the exponent field stays at its smallest; the implicit bit is in q
    mag = ((ue_c - fmt.emin + exp_base) << m) + q - (0 if fmt.has_subnormals else 1)

    if not fmt.has_zero:
        # E8M0: no zero, so anything positive below 2^-127 goes to 2^-127 (code 0)
        mag = mag.clamp(min=0)
    overflow = is_inf | (mag > fmt.max_code)
    # Saturate: finite overflow and inf -> max. So does every overflow of a format with neither
    # inf nor NaN (nothing else to write), and finite overflow under RTZ (IEEE 754's rule).
    if saturate or not fmt.has_nan:
        to_max = overflow
    elif rounding == Rounding.RTZ:
        to_max = overflow & ~is_inf
    else:
        to_max = torch.zeros_like(overflow)
    mag = torch.where(to_max, torch.full_like(mag, fmt.max_code), mag)
    overflow = overflow & ~to_max
    if fmt.has_inf:
        mag = torch.where(overflow, torch.full_like(mag, fmt.inf_codes[0]), mag)
        overflow_to_nan = torch.zeros_like(overflow)
    else:
        overflow_to_nan = overflow

    # a NaN input to a format without NaN never reaches here through encode (it raises); the
    # table paths hold code 0 for those patterns
    nan_code = fmt.canonical_nan_code or 0  # (a format without NaN has None)
    nan_mask = is_nan | overflow_to_nan
    if fmt.signed:
        top = fmt.bits - 1
        code = mag | (sign << top)
        if not fmt.has_negative_zero:
            code = torch.where(mag == 0, torch.zeros_like(code), code)
        if fmt.nan_rule in (NanRule.FNUZ, NanRule.NONE):
            nan_val = torch.full_like(code, nan_code)
        else:
            nan_val = nan_code | (sign << top)
        code = torch.where(nan_mask, nan_val, code)
    else:
        # unsigned: negatives have no encoding, nor does zero in E8M0; -0.0 is 0 where zero exists
        no_code = ((sign == 1) & (a != 0)) if fmt.has_zero else ((sign == 1) | (a == 0))
        code = torch.where(nan_mask | no_code, torch.full_like(mag, nan_code), mag)
    return code.to(torch.uint8)


# --------------------------------------------------------------------------------------------
# encode: table fast paths, built from _encode_exact
# --------------------------------------------------------------------------------------------
@functools.cache
def _table_16bit(fmt: FloatFormat, saturate: bool, dtype: torch.dtype) -> torch.Tensor:
    """Codes of all 65,536 bit patterns of a 16-bit float dtype, indexed by pattern."""
    patterns = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)
    return _encode_exact(patterns.float(), fmt, saturate)


_CHUNK = 1 << 18  # elements per step on CPU: keeps the int32 temporaries in cache


def _f32_to_bf16_round_to_odd_bits(bits: torch.Tensor, out: torch.Tensor, tmp: torch.Tensor) -> None:
    """out = the bfloat16 pattern of float32 ``bits`` rounded to odd (truncate, then set the
    lowest bit if anything non-zero was cut off), as int32 in [0, 65535]."""
    torch.bitwise_right_shift(bits, 16, out=out)
    out.bitwise_and_(0xFFFF)  # the shift is arithmetic: drop the sign extension
    torch.bitwise_and(bits, 0xFFFF, out=tmp)
    tmp.clamp_(max=1)
    out.bitwise_or_(tmp)


def _encode_f32_fast(x: torch.Tensor, fmt: FloatFormat, saturate: bool) -> torch.Tensor:
    table = _table_16bit(fmt, saturate, torch.bfloat16).to(x.device)
    bits = x.contiguous().view(torch.int32).reshape(-1)
    out = torch.empty(bits.shape, dtype=torch.uint8, device=x.device)
    chunk = _CHUNK if x.device.type == "cpu" else max(bits.numel(), 1)
    key = torch.empty(min(chunk, bits.numel()), dtype=torch.int32, device=x.device)
    tmp = torch.empty_like(key)
    for i in range(0, bits.numel(), chunk):
        n = min(chunk, bits.numel() - i)
        _f32_to_bf16_round_to_odd_bits(bits[i : i + n], key[:n], tmp[:n])
        torch.index_select(table, 0, key[:n], out=out[i : i + n])
    return out.view(x.shape)


def encode(
    x: torch.Tensor,
    fmt: str | FloatFormat,
    saturate: bool = False,
    *,
    rounding: Rounding | str = Rounding.RNE,
    generator: torch.Generator | None = None,
    random_bits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Round ``x`` to ``fmt`` and return its codes (uint8, one code per byte, low bits).

    ``x``: float32, bfloat16 or float16 tensor (any shape, any device). ``saturate``: clamp
    finite overflow and +-inf to +-max instead of producing inf/NaN. ``rounding``: ``rne``
    (nearest, ties to even; the default), ``rtz`` (toward zero) or ``sr`` (stochastic: up with
    probability equal to the dropped fraction of an ulp, drawing 24 random bits per element from
    ``generator``, or taking them from ``random_bits``: an integer tensor of ``x``'s shape with
    values in [0, 2^24)). See the module docstring for NaN, zero, E8M0 and narrow-format rules.
    A NaN input to a format without NaN (FP4/FP6) is a ValueError: those formats have no code
    for it.
    """
    fmt = get_format(fmt)
    tensor(x, "x", dtypes=SUPPORTED_INPUT_DTYPES)
    boolean(saturate, "saturate")
    rounding = choice(rounding, Rounding, "rounding")
    if generator is not None:
        instance(generator, torch.Generator, "generator", "a torch.Generator")
    if random_bits is not None:
        _check_random_bits(random_bits, x, rounding, generator)
    if not fmt.has_nan and bool(torch.isnan(x).any()):
        raise ValueError(f"x: {fmt.name} has no NaN; {int(torch.isnan(x).sum())} NaN input(s) cannot be encoded")
    if rounding != Rounding.RNE:
        rand = None
        if rounding == Rounding.SR:
            if random_bits is not None:
                rand = random_bits.to(device=x.device, dtype=torch.int64)
            else:
                rand = torch.randint(
                    0,
                    1 << _SR_BITS,
                    x.shape,
                    generator=generator,
                    dtype=torch.int64,
                    device="cpu" if generator is None else generator.device,
                ).to(x.device)
        return _encode_exact(x.float(), fmt, saturate, rounding, rand)
    if x.dtype == torch.float32:
        return _encode_f32_fast(x, fmt, saturate)
    table = _table_16bit(fmt, saturate, x.dtype).to(x.device)
    key = x.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    return table[key]


def _check_random_bits(
    random_bits: torch.Tensor, x: torch.Tensor, rounding: Rounding, generator: torch.Generator | None
) -> None:
    if rounding != Rounding.SR:
        raise ValueError(f"random_bits: only stochastic rounding ('sr') takes random bits, got rounding={rounding}")
    if generator is not None:
        raise ValueError("random_bits: give either random_bits or a generator, not both")
    tensor(random_bits, "random_bits")
    if random_bits.dtype.is_floating_point or random_bits.dtype.is_complex or random_bits.dtype == torch.bool:
        raise TypeError(f"random_bits: expected an integer tensor, got {random_bits.dtype}")
    if random_bits.shape != x.shape:
        raise ValueError(f"random_bits: expected x's shape {tuple(x.shape)}, got {tuple(random_bits.shape)}")
    if random_bits.numel() and (int(random_bits.min()) < 0 or int(random_bits.max()) >= 1 << _SR_BITS):
        lo, hi = int(random_bits.min()), int(random_bits.max())
        raise ValueError(f"random_bits: expected values in [0, 2^{_SR_BITS}), got [{lo}, {hi}]")


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Two FP4 codes per byte along the last dim: element ``2i`` in the low nibble, ``2i + 1`` in
    the high nibble (the order of torch's ``float4_e2m1fn_x2`` and of torchao's ``pack_uint4``)."""
    tensor(codes, "codes", dtypes=(torch.uint8,))
    if codes.dim() < 1 or codes.shape[-1] % 2:
        raise ValueError(f"codes: expected an even last dim to pack two per byte, got shape {tuple(codes.shape)}")
    if codes.numel() and int(codes.max()) > 0xF:
        raise ValueError(f"codes: expected 4-bit codes (0..15), got a maximum of {int(codes.max())}")
    pairs = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    return pairs[..., 0] | (pairs[..., 1] << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of ``pack_fp4``: (..., n) bytes -> (..., 2n) codes."""
    tensor(packed, "packed", dtypes=(torch.uint8,))
    if packed.dim() < 1:
        raise ValueError("packed: expected at least one dim, got a 0-d tensor")
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def round_to_format(
    x: torch.Tensor,
    fmt: str | FloatFormat,
    saturate: bool = False,
    *,
    rounding: Rounding | str = Rounding.RNE,
    generator: torch.Generator | None = None,
    random_bits: torch.Tensor | None = None,
) -> torch.Tensor:
    """``decode(encode(x))``: x rounded to the format, as float32."""
    codes = encode(x, fmt, saturate=saturate, rounding=rounding, generator=generator, random_bits=random_bits)
    return decode(codes, fmt)
