"""The 2^32 float32 sweep: every float32 bit pattern through a cast, compared with the codec, with
whole chunks of one input class checked at the cost of the cast itself."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ...reference.formats import FloatFormat, as_format
from .conformance import CastReport, Mode, check_cast, encode_or_zero, is_nan_code, merge_reports
from .implementations import Implementation

__all__ = ["sweep_float32", "overflow_threshold"]

_INF_BITS = 0x7F800000


@functools.cache
def overflow_threshold(fmt: FloatFormat) -> int:
    """The smallest float32 magnitude bit pattern that overflows ``fmt`` when rounded to nearest
    (the codec's saturating and non-saturating results differ from there up to inf), found by
    bisection with the codec: every larger finite pattern overflows too."""

    def overflows(a: int) -> bool:
        x = torch.tensor([a], dtype=torch.int32).view(torch.float32)
        return bool(encode_or_zero(x, fmt, False)[0] != encode_or_zero(x, fmt, True)[0])

    lo, hi = 0, _INF_BITS - 1  # lo never overflows (zero), hi does (float32 max)
    if not overflows(hi):
        return _INF_BITS  # nothing finite overflows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if overflows(mid) else (mid, hi)
    return hi


def _same_codes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``torch.equal`` of two code tensors, compared eight bytes at a time where they allow it
    (torch.equal on uint8 runs at about a seventh of the speed on one thread)."""
    if (
        a.dtype == b.dtype == torch.uint8
        and a.numel() % 8 == 0
        and all(t.is_contiguous() and t.storage_offset() % 8 == 0 for t in (a, b))
    ):
        return torch.equal(a.view(torch.int64), b.view(torch.int64))
    return torch.equal(a, b)


def _homogeneous_report(
    impl: Implementation,
    fmt: FloatFormat,
    inputs: str,
    x: torch.Tensor,
    got: torch.Tensor,
    a_lo: int,
    a_hi: int,
    negative: bool,
) -> CastReport | None:
    """The report for a chunk of consecutive float32 patterns that lie in one input class, at the
    cost of one codec pass and one comparison; None when the chunk is mixed, or does not match
    the one expected answer (the caller then runs the full ``check_cast`` and its readable lines)."""
    n = x.numel()
    counts = dict.fromkeys(("in_range", "nan", "overflow", "inf", "no_encoding"), 0)
    base: dict[str, Any] = {
        "impl": str(impl),
        "fmt": fmt.name,
        "inputs": inputs,
        "in_range_mismatches": 0,
        "nan_not_nan": 0,
        "overflow_modes": (),
        "inf_modes": (),
        "no_encoding_words": (),
        "nan_codes": [],
        "mode_mismatches": 0,
        "failures": [],
    }
    unsigned_negative = not fmt.signed and negative
    if a_lo > _INF_BITS:  # all NaN: which codes came back, and are they all NaN
        seen = torch.bincount(got, minlength=256).nonzero().flatten().tolist()
        if fmt.has_nan and not all(c < fmt.n_codes and fmt.is_nan_code(c) for c in seen):
            return None
        counts["nan"] = n
        return CastReport(counts=counts, **{**base, "nan_codes": [f"0x{c:02x}" for c in seen]})
    if a_hi >= _INF_BITS or (not fmt.has_zero and a_lo == 0):
        return None  # inf, or E8M0's zero: the full check observes them
    if unsigned_negative:  # no encoding: one word must explain every input that tells them apart
        abs_codes = encode_or_zero(x.abs(), fmt, False)
        if a_lo == 0 or not bool((~is_nan_code(abs_codes, fmt) & (abs_codes != 0)).all()):
            return None  # -0.0, or negatives whose abs cannot tell the words apart: the full check
        # the words are exclusive here (the abs codes are neither NaN nor zero), so the first
        # code names the only one that can fit the chunk
        first = int(got[0])
        if first < fmt.n_codes and fmt.is_nan_code(first):
            word, fits = "negative->nan", bool(is_nan_code(got, fmt).all())
        elif first == 0:
            word, fits = "negative->min", bool((got == 0).all())
        else:
            word, fits = "negative->abs", _same_codes(got, abs_codes)
        if not fits:
            return None
        counts["no_encoding"] = n
        return CastReport(counts=counts, **{**base, "no_encoding_words": (word,)})
    threshold = overflow_threshold(fmt)
    if a_hi < threshold:  # all in range: one codec pass, equal or not
        if not _same_codes(got, encode_or_zero(x, fmt, False)):
            return None
        counts["in_range"] = n
        return CastReport(counts=counts, **base)
    if a_lo >= threshold:  # all finite overflow of one sign: the codec's answer is one code per mode
        sign = (1 << (fmt.bits - 1)) if fmt.signed and negative else 0
        saturated = bool((got == (fmt.max_code | sign)).all())
        if fmt.has_inf:
            overflowed = bool((got == (fmt.inf_codes[0] | sign)).all())
        else:
            overflowed = fmt.has_nan and bool(is_nan_code(got, fmt).all())
        for mode, fits in ((Mode.SATURATE, saturated), (Mode.NONSATURATE, overflowed)):
            if bool(fits):
                counts["overflow"] = n
                return CastReport(counts=counts, **{**base, "overflow_modes": (mode,)})
    return None


def sweep_float32(
    impl: Implementation, fmt: FloatFormat, first: int = 0, count: int = 1 << 32, chunk: int = 1 << 20
) -> CastReport:
    """Every float32 bit pattern in ``[first, first + count)`` (as unsigned 32-bit patterns) cast
    by ``impl`` and compared with the codec, ``chunk`` at a time; one merged ``CastReport``.

    A chunk whose inputs are all in range, all NaN or all finite overflow is checked with one
    codec pass and one comparison; a chunk that mixes classes (or differs) goes through the full
    ``check_cast``, whose report says what differs. Chunks never straddle the sign bit."""
    fmt = as_format(fmt)
    if not (0 <= first and count > 0 and first + count <= 1 << 32 and first % chunk == 0 and count % chunk == 0):
        raise ValueError(
            f"first, count: expected a range of whole {chunk}-pattern chunks in [0, 2^32), "
            f"got first={first}, count={count}"
        )
    base = torch.arange(chunk, dtype=torch.int32)
    reports = []
    for start in range(first, first + count, chunk):
        signed_start = start - (1 << 32) if start >= 1 << 31 else start
        x = (base + signed_start).view(torch.float32)
        got = impl.cast(x).reshape(-1)
        a_lo = start & 0x7FFFFFFF
        report = _homogeneous_report(impl, fmt, "all float32", x, got, a_lo, a_lo + chunk - 1, start >= 1 << 31)
        if report is None:
            report = check_cast(impl, x, fmt, "all float32", got=got)
            if not report.ok:
                report.failures.insert(0, f"chunk starting at 0x{start:08x}:")
        reports.append(report)
    return merge_reports(reports, "all float32")
