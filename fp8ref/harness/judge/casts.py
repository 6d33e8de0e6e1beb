"""How a value may become a float8 code by the definition, never by the install's cast: rounded
to nearest even by the codec (``reference.codec.encode``) for a float32, bfloat16 or float16
value, by the definition (``reference.definition.round_by_definition``) for a float64 one; a
float64 or integer source may also go through float32 first (which of the two a cast takes is
the install's, observed); out of range either saturated or not (implementation-defined: the
behaviour profile pins which)."""

from __future__ import annotations

import dataclasses
import math

import torch

from ...reference.codec import decode, encode
from ...reference.definition import overflows, round_by_definition
from ...reference.formats import FloatFormat
from ..casts.deviations import for_format

__all__ = ["Reading", "rounded", "cast_readings", "agrees", "unsigned_ok", "unsigned_answer", "excused_cast_deviations"]


@dataclasses.dataclass
class Reading:
    """One acceptable way to arrive at a float8 answer: the values rounded without saturation
    (``want``) and, for the elements out of range, saturated (``saturated``)."""

    name: str
    want: torch.Tensor
    saturated: torch.Tensor
    out_of_range: torch.Tensor
    # where the format holds no value of the input's sign (an unsigned format with no zero, E8M0:
    # zero and negatives) the definition gives no code; two answers are accepted there, and which
    # came is observed (``unsigned_answer``): NaN, or the code of the magnitude (zero the smallest
    # value), torch's (pinned as cast.e8m0fnu.f32.ties_and_zero and the bf16/f16 no_encoding keys)
    undefined: torch.Tensor
    magnitude: torch.Tensor  # the magnitude's answer there (NaN elsewhere)


def rounded(x: torch.Tensor, fmt: FloatFormat, name: str) -> Reading:
    """``x`` rounded to nearest even into ``fmt``: by the codec for a float32, bfloat16 or
    float16 ``x``, by the definition (which the codec is proved against) for float64."""
    if x.dtype in (torch.float32, torch.bfloat16, torch.float16):
        want = decode(encode(x, fmt), fmt).double()
        saturated = decode(encode(x, fmt, saturate=True), fmt).double()
    else:
        want, saturated = round_by_definition(x, fmt), round_by_definition(x, fmt, saturate=True)
    xd = x.double()
    undefined = (xd <= 0) if not fmt.signed else torch.zeros(xd.shape, dtype=torch.bool)
    magnitude = torch.full(xd.shape, math.nan, dtype=torch.float64)
    if bool(undefined.any()):
        smallest = torch.full(xd.shape, fmt.min_subnormal)  # (the smallest value: E8M0 2^-127)
        magnitude = torch.where(xd == 0, smallest.double(), round_by_definition(xd.abs(), fmt, saturate=True))
        magnitude = torch.where(undefined, magnitude, torch.full_like(magnitude, math.nan))
    return Reading(name, want, saturated, overflows(xd, fmt) | torch.isinf(xd), undefined, magnitude)


def cast_readings(x: torch.Tensor, fmt: FloatFormat) -> list[Reading]:
    """How a value of ``x``'s dtype may be cast into ``fmt``: rounded once; for a float64 or
    integer source also through float32 (which of the two a cast takes is the install's)."""
    if x.dtype in (torch.float32, torch.bfloat16, torch.float16):
        return [rounded(x, fmt, "rounded once")]
    xd = x.double()
    return [rounded(xd, fmt, "rounded once"), rounded(xd.float(), fmt, "through float32")]


def agrees(got: torch.Tensor, readings: list[Reading]) -> torch.Tensor:
    """Where ``got`` (float64 values) is one of the readings' answers: rounded without saturation,
    or, where the value is out of range, saturated (any NaN for a NaN, -0 apart from +0)."""
    ok = torch.zeros(got.shape, dtype=torch.bool)
    for r in readings:
        ok |= _same(got, r.want) | (r.out_of_range & _same(got, r.saturated)) | unsigned_ok(got, r)
    return ok


def unsigned_ok(got: torch.Tensor, r: Reading) -> torch.Tensor:
    """Where the format has no code for the input (``Reading.undefined``): NaN or the magnitude's."""
    return r.undefined & (torch.isnan(got) | _same(got, r.magnitude))


def unsigned_answer(got: torch.Tensor, r: Reading) -> str | None:
    """Which answer came where the format has no code for the input: ``nan``, ``magnitude``,
    ``mixed``; None when no element is such."""
    if not bool(r.undefined.any()):
        return None
    nan, mag = torch.isnan(got[r.undefined]), _same(got, r.magnitude)[r.undefined]
    return "nan" if bool(nan.all()) else "magnitude" if bool(mag.all()) else "mixed"


def _same(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    return ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))


def excused_cast_deviations(
    x: torch.Tensor, fmt: FloatFormat, codes: torch.Tensor, ok: torch.Tensor, counts: dict[str, int]
) -> torch.Tensor:
    """Of the elements not ``ok``, those a named deviation of torch's cast (``casts.deviations``:
    its inputs, its exact answer, with its versions) explains; counted per deviation in ``counts``.
    ``x``: the values cast; ``codes``: the codes given."""
    excused = torch.zeros_like(ok)
    for d in for_format(fmt):
        if "torch" in d.impls:
            hit = ~ok & d.inputs(x) & (codes == d.answer(x))
            if bool(hit.any()):
                counts[d.key] = counts.get(d.key, 0) + int(hit.sum())
                excused |= hit
    return excused
