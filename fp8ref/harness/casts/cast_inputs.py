"""Inputs for cast conformance: every 16-bit pattern, and float32 values placed where rounding
can go wrong for a given format (every value, every midpoint, one ulp either side, the overflow
boundary, the subnormal range, specials)."""

from __future__ import annotations

import torch

from ...reference.codec import encode
from ...reference.formats import FloatFormat, as_format

__all__ = [
    "all_16bit_inputs",
    "float32_structured_inputs",
    "float64_double_rounding_inputs",
    "definition_input_classes",
    "training_tensor_with",
    "f32_bits",
    "f32_from_bits",
]


def all_16bit_inputs(dtype: torch.dtype) -> torch.Tensor:
    """All 65,536 bit patterns of bfloat16 or float16, in pattern order."""
    if dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"dtype: expected torch.bfloat16 or torch.float16, got {dtype}")
    return torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)


def f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


def f32_from_bits(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.int32).view(torch.float32)


def float32_structured_inputs(fmt: FloatFormat) -> dict[str, torch.Tensor]:
    """float32 inputs that pin rounding at every place it can go wrong, by name:

    - ``representable``: every finite value of the format (both signs);
    - ``midpoints``: every midpoint between neighbouring finite values (ties: the even one wins);
    - ``midpoints_pm_ulp``: one float32 ulp below and above each midpoint (no longer ties);
    - ``overflow_boundary``: max, the midpoint above max (rounds to max or overflows by RNE),
      one ulp either side, and a ladder of values up to float32 max;
    - ``subnormal_range``: a dense grid from 0 to twice min normal, plus values around half
      of min subnormal (where rounding to zero stops);
    - ``specials``: +-0, +-inf, NaNs with various payloads, float32 subnormals and extremes.
    """
    fmt = as_format(fmt)
    vals = torch.tensor(fmt.all_values(), dtype=torch.float64)
    finite = vals[torch.isfinite(vals)]
    pos = torch.unique(finite[finite >= 0])  # sorted
    if fmt.has_zero and pos[0] != 0:
        raise AssertionError("zero missing from a format that has it")
    mids = (pos[1:] + pos[:-1]) / 2  # exact in float64, and representable in float32
    mids32 = mids.float()
    mids_bits = f32_bits(mids32)
    below = f32_from_bits(mids_bits - 1)
    above = f32_from_bits(mids_bits + 1)
    top = pos[-1]
    ulp_top = top - pos[-2]
    over_mid = torch.tensor([top + ulp_top / 2], dtype=torch.float64).float()
    boundary = torch.cat(
        [
            torch.tensor([top], dtype=torch.float32),
            over_mid,
            f32_from_bits(f32_bits(over_mid) - 1),
            f32_from_bits(f32_bits(over_mid) + 1),
            torch.tensor([float(top + ulp_top), float(top) * 2, float(top) * 1000, 3.4028234663852886e38]).float(),
        ]
    )
    tiny = fmt.min_subnormal
    sub = torch.linspace(0, 2 * fmt.min_normal, 4097, dtype=torch.float64).float()
    half_tiny = torch.tensor([tiny / 2], dtype=torch.float64).float()
    sub = torch.cat(
        [
            sub,
            half_tiny,
            f32_from_bits(f32_bits(half_tiny) - 1),
            f32_from_bits(f32_bits(half_tiny) + 1),
            torch.tensor([tiny / 4, tiny * 0.75]),
        ]
    )
    specials = f32_from_bits(
        torch.tensor(
            [
                0x00000000,
                0x7F800000,
                0x7FC00000,
                0x7F800001,
                0x7FFFFFFF,
                0x7FA00000,
                0x00000001,
                0x00400000,
                0x007FFFFF,
                0x00800000,
                0x7F7FFFFF,
                0x3F800000,
                0x3F800001,
            ],
            dtype=torch.int64,
        )
    )

    def both_signs(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t, -t])

    return {
        "representable": both_signs(pos.float()),
        "midpoints": both_signs(mids32),
        "midpoints_pm_ulp": both_signs(torch.cat([below, above])),
        "overflow_boundary": both_signs(boundary),
        "subnormal_range": both_signs(sub.float()),
        "specials": both_signs(specials),
    }


def float64_double_rounding_inputs(fmt: FloatFormat) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float64 inputs whose FP8 code depends on whether a cast rounds the float64 value once or
    rounds it to float32 first: ``(x, once, via_float32)``, the inputs and both answers' codes.

    Each input lies a hair (2^-39 relative, far below a float32 ulp) beyond a midpoint between two
    neighbouring finite values, towards the odd one: rounded once it goes to the odd neighbour;
    rounded to float32 first it becomes the midpoint itself, a tie, and goes to the even one. Both
    signs where the format has a sign."""
    fmt = as_format(fmt)
    vals = torch.tensor(fmt.all_values(), dtype=torch.float64)
    pos = torch.unique(vals[torch.isfinite(vals) & (vals >= 0)])  # sorted
    lo, hi = pos[:-1], pos[1:]
    mid = (lo + hi) / 2
    lo_even = (encode(lo.float(), fmt) & 1) == 0  # a tie goes to the even code
    toward = torch.where(lo_even, hi, lo)  # the odd neighbour: where rounding once goes
    x = mid + (toward - mid) * 2.0**-38
    if fmt.signed:
        x, toward = torch.cat([x, -x]), torch.cat([toward, -toward])
    once, via = encode(toward.float(), fmt), encode(x.float(), fmt)
    keep = once != via
    return x[keep], once[keep], via[keep]


def training_tensor_with(special: str) -> torch.Tensor:
    """A small bfloat16 activation (2 x 4) whose first row holds one ``nan``, ``inf`` or ``-inf``
    among finite values and whose second row is finite: what a scale and a cast make of a NaN
    or inf in a training tensor, for the whole tensor (tensorwise) and per row (rowwise)."""
    value = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
    if special not in value:
        raise ValueError(f"special: expected one of {sorted(value)}, got {special!r}")
    return torch.tensor([[1.0, 2.0, value[special], -3.0], [0.5, 0.25, 1.0, 2.0]], dtype=torch.bfloat16)


def _f32_patterns(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.int64).bitwise_and(0xFFFFFFFF).to(torch.int32).view(torch.float32)


def definition_input_classes(fmt: FloatFormat, *, full: bool = False) -> dict[str, torch.Tensor]:
    """The inputs on which the codec is proved against the definition (``reference.definition``),
    by class; NaN inputs left out of a format without NaN (neither has a code for them):

    - ``bf16 patterns``, ``f16 patterns``: all 65,536 of each;
    - ``f32 subnormals``: float32 subnormals of both signs. Where the format's range reaches
      below 2^-126 (E8M0: 2^-127) every one of them with ``full`` (2 x (2^23 - 1)), else every
      97th plus every pattern within 64 of the points that decide that range (2^-128, 2^-127,
      1.5 x 2^-127, 2^-126); for the other formats (where they all round to zero) every 4099th;
    - ``f32 boundaries``: every value, every midpoint (also the one above max) and one float32
      ulp either side of each, the overflow ladder, the subnormal grid, the specials;
    - ``f32 random``: uniformly random float32 bit patterns (2^16, or 2^22 with ``full``), seeded.
    """
    fmt = as_format(fmt)
    classes = {
        "bf16 patterns": all_16bit_inputs(torch.bfloat16),
        "f16 patterns": all_16bit_inputs(torch.float16),
    }
    if fmt.min_subnormal < 2.0**-126:
        step = 1 if full else 97
        sub = torch.arange(1, 1 << 23, step, dtype=torch.int64)
        if not full:
            edges = torch.tensor([1 << 21, 1 << 22, 3 << 21, (1 << 23) - 1], dtype=torch.int64)
            near = (edges[:, None] + torch.arange(-64, 65, dtype=torch.int64)[None, :]).reshape(-1)
            sub = torch.unique(torch.cat([sub, near.clamp(1, (1 << 23) - 1)]))
    else:
        sub = torch.arange(1, 1 << 23, 4099, dtype=torch.int64)
    classes["f32 subnormals"] = _f32_patterns(torch.cat([sub, sub | (1 << 31)]))
    structured = float32_structured_inputs(fmt)
    values = structured["representable"]
    around = f32_bits(values[torch.isfinite(values)])
    classes["f32 boundaries"] = torch.cat([*structured.values(), f32_from_bits(around - 1), f32_from_bits(around + 1)])
    gen = torch.Generator().manual_seed(28)
    n = 1 << (22 if full else 16)
    classes["f32 random"] = _f32_patterns(torch.randint(0, 1 << 32, (n,), generator=gen, dtype=torch.int64))
    if not fmt.has_nan:
        classes = {k: v[~torch.isnan(v.float())] for k, v in classes.items()}
    return classes
