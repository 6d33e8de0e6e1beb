"""Rounding by the definition: the format's value table and exact comparisons, nothing else.

This is the oracle the codec (``codec``) is proved against. It shares none of the codec's bit
arithmetic: it reads each format's values from its decoded codes (``FloatFormat.value_of``, the
bit definition), finds the two neighbours of every input in that table, and decides by
comparisons in float64:

- RNE: the nearer neighbour; at the exact midpoint the one whose significand is even, and where
  neither is (E8M0, whose significands are all 1) the upper one, the codec's stated tie rule;
- RTZ: the lower neighbour (in magnitude);
- SR: up when the random integer ``r`` satisfies ``r * (upper - lower) < (|x| - lower) * 2^24``,
  i.e. ``r < p * 2^24`` with ``p = (|x| - lower) / (upper - lower)`` (``sr_up_probability``).

Every float64 operation here is exact: inputs are float32/bfloat16/float16 values (24 significant
bits at most), table values have at most 4, two neighbours lie within a factor of two of each
other (or one is 0), so midpoints, differences ``|x| - lower`` (below 2^25 units of |x|'s last
bit) and the products with 2^24 and with ``r < 2^24`` all fit in float64's 53 bits.

Above max the table continues with the value one unit above max as if the exponent range were
unbounded (``beyond_max``): an input that rounds there overflows. What an overflow, an infinity,
a NaN, a zero or a value with no encoding becomes follows the rules the codec's docstring states
(saturating or not; inf where the format has it, else NaN; -0 where the format has it; E8M0 has no
zero and takes every positive value below 2^-127 to 2^-127). The results are values (float64),
not codes, so the oracle does not depend on how codes are laid out either.
"""

from __future__ import annotations

import functools
import math

import torch

from .formats import FloatFormat, get_format
from .validate import Choice, boolean, choice, tensor

__all__ = [
    "SR_BITS",
    "value_table",
    "beyond_max",
    "neighbours",
    "sr_up_probability",
    "overflows",
    "round_by_definition",
]

SR_BITS = 24  # random bits per stochastic rounding decision (as the codec draws them)


class _Rounding(Choice):
    RNE = "rne"
    RTZ = "rtz"
    SR = "sr"


@functools.cache
def _value_table(fmt: FloatFormat) -> torch.Tensor:
    values = {fmt.value_of(c) for c in range(fmt.n_codes)}
    return torch.tensor(sorted(v for v in values if math.isfinite(v) and v >= 0), dtype=torch.float64)


def value_table(fmt: str | FloatFormat) -> torch.Tensor:
    """The format's distinct finite non-negative values, ascending (float64), from its codes."""
    return _value_table(get_format(fmt))


def beyond_max(fmt: str | FloatFormat) -> float:
    """The value one unit above max with an unbounded exponent range: max plus one unit in its
    last place, which carries into the next binade when max's mantissa is all ones (E5M2: 2^16,
    E4M3FN: 480, E8M0: 2^128)."""
    fmt = get_format(fmt)
    unit = math.ldexp(1.0, fmt.emax - fmt.man_bits)
    return fmt.max + unit


def _significand_is_even(v: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Whether the integer significand of each value (at the format's exponent for it) is even;
    0 counts as even. E8M0's significand is always 1."""
    e = torch.frexp(torch.where(v > 0, v, torch.ones_like(v)))[1].to(torch.float64) - 1
    e = e.clamp(min=fmt.emin)
    sig = v / torch.exp2(e - fmt.man_bits)  # exact: a power-of-two division of an exact value
    return torch.remainder(sig, 2) == 0


def neighbours(a: torch.Tensor, fmt: str | FloatFormat) -> tuple[torch.Tensor, torch.Tensor]:
    """For finite magnitudes ``a >= 0`` (float64): the largest table value ``<= a`` and the next
    one above it (``beyond_max`` after max). Below the smallest value of a format without zero
    (E8M0) both are that smallest value; at or above ``beyond_max`` both are ``beyond_max``."""
    fmt = get_format(fmt)
    tensor(a, "a", dtypes=(torch.float64,))
    if bool((a < 0).any()) or not bool(torch.isfinite(a).all()):
        raise ValueError("a: expected finite magnitudes >= 0")
    ext = torch.cat([value_table(fmt), torch.tensor([beyond_max(fmt)], dtype=torch.float64)])
    i = torch.searchsorted(ext, a, right=True) - 1
    lower = ext[i.clamp(min=0)]
    upper = ext[(i + 1).clamp(max=ext.numel() - 1)]
    below_all = i < 0
    return torch.where(below_all, ext[0], lower), torch.where(below_all, ext[0], upper)


def sr_up_probability(x: torch.Tensor, fmt: str | FloatFormat) -> torch.Tensor:
    """``p = (|x| - lower) / (upper - lower)`` for finite ``x`` (float64; 0 where |x| is a value
    of the format, below E8M0's smallest value, or at or past ``beyond_max``)."""
    fmt = get_format(fmt)
    a = tensor(x, "x", floating=True).double().abs()
    lower, upper = neighbours(torch.where(torch.isfinite(a), a, torch.zeros_like(a)), fmt)
    gap = upper - lower
    return torch.where(gap > 0, (a - lower) / torch.where(gap > 0, gap, torch.ones_like(gap)), torch.zeros_like(a))


def overflows(x: torch.Tensor, fmt: str | FloatFormat, rounding: str = "rne") -> torch.Tensor:
    """Which finite inputs round past max (to ``beyond_max`` or above) under RNE or RTZ, before
    any saturation: where saturating and non-saturating casts part ways."""
    fmt = get_format(fmt)
    mode = choice(rounding, _Rounding, "rounding")
    if mode == _Rounding.SR:
        raise ValueError("rounding: whether SR overflows depends on its random bits; expected 'rne' or 'rtz'")
    a = tensor(x, "x", floating=True).double().abs()
    top = beyond_max(fmt)
    finite = torch.isfinite(a)
    if mode == _Rounding.RTZ:
        return finite & (a >= top)
    mid = (fmt.max + top) / 2
    tie_up = fmt.man_bits == 0 or bool(_significand_is_even(torch.tensor([top]), fmt)[0])
    return finite & ((a > mid) | ((a == mid) & tie_up))


def round_by_definition(
    x: torch.Tensor,
    fmt: str | FloatFormat,
    *,
    rounding: str = "rne",
    saturate: bool = False,
    random_bits: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x`` (float64, float32, bfloat16 or float16) rounded to ``fmt`` by the definition, as float64
    values: NaN where the result is NaN (a NaN input, a non-saturated overflow of a format
    without inf, a value an unsigned format cannot encode), +-inf, and -0.0 where the format
    has it. ``rounding``: ``rne``, ``rtz`` or ``sr`` (``random_bits``: integers in [0, 2^24) of
    ``x``'s shape). A NaN input to a format without NaN is a ValueError, as in the codec."""
    fmt = get_format(fmt)
    tensor(x, "x", dtypes=(torch.float64, torch.float32, torch.bfloat16, torch.float16))
    mode = choice(rounding, _Rounding, "rounding")
    boolean(saturate, "saturate")
    if mode == _Rounding.SR:
        if not isinstance(random_bits, torch.Tensor) or random_bits.shape != x.shape:
            raise ValueError(f"random_bits: stochastic rounding needs integers of x's shape {tuple(x.shape)}")
    xd = x.double()
    nan_in = torch.isnan(xd)
    if not fmt.has_nan and bool(nan_in.any()):
        raise ValueError(f"x: {fmt.name} has no NaN; {int(nan_in.sum())} NaN input(s) cannot be encoded")
    neg = torch.signbit(xd)
    a = xd.abs()
    inf_in = torch.isinf(a)
    finite = ~nan_in & ~inf_in
    af = torch.where(finite, a, torch.zeros_like(a))

    lower, upper = neighbours(af, fmt)
    if mode == _Rounding.RTZ:
        up = torch.zeros_like(finite)
    elif mode == _Rounding.SR:
        assert random_bits is not None
        r = random_bits.reshape(x.shape).to(torch.float64)
        up = r * (upper - lower) < (af - lower) * 2.0**SR_BITS
    else:
        mid = (lower + upper) / 2
        if fmt.man_bits:
            tie_up = ~_significand_is_even(lower, fmt)  # the upper one is the even one
        else:
            tie_up = torch.ones_like(finite)  # E8M0: neither is even; the stated rule is up
        up = (af > mid) | ((af == mid) & tie_up)
    v = torch.where(up, upper, lower)

    top = beyond_max(fmt)
    overflow = finite & (v >= top)
    if fmt.has_inf:
        too_big = torch.full_like(v, math.inf)
    elif fmt.has_nan:
        too_big = torch.full_like(v, math.nan)
    else:
        too_big = torch.full_like(v, fmt.max)  # FP4/FP6: nothing but max to write
    if saturate:
        v = torch.where(overflow | inf_in, torch.full_like(v, fmt.max), v)
    else:
        # IEEE 754: rounding toward zero never overflows a finite value to infinity
        finite_to_max = overflow & (mode == _Rounding.RTZ)
        v = torch.where(finite_to_max, torch.full_like(v, fmt.max), v)
        v = torch.where((overflow & ~finite_to_max) | inf_in, too_big, v)

    zero_in = finite & (a == 0)
    if fmt.has_zero:
        v = torch.where(zero_in, torch.zeros_like(v), v)
    if fmt.signed:
        keep_sign = neg & ~torch.isnan(v) & (fmt.has_negative_zero | (v != 0))
        v = torch.where(keep_sign, -v, v)
        no_code = torch.zeros_like(neg)
    else:
        no_code = (neg & ~zero_in) if fmt.has_zero else (neg | zero_in)
    return torch.where(nan_in | no_code, torch.full_like(v, math.nan), v)
