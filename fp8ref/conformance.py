"""Compare an implementation's FP8 casts with the codec, and observe what it does out of range.

An *implementation* is anything that turns a float32/bfloat16/float16 tensor into uint8 codes of
a format: torch's native cast (``x.to(torch.float8_*)``, optionally on another device) and
ml_dtypes' numpy cast ship here. This module is the harness the tests and the behaviour profile
use; it is *not* the reference (that is ``codec``), so calling the native cast here is the point.

Each input is put in one class, from the format definition alone (via the codec):
- ``in_range``: finite and representable after rounding (for E8M0 also positive). Must match the
  codec bitwise on every implementation.
- ``nan``: NaN inputs. Must give a NaN code; which NaN code is reported, not asserted. A format
  without NaN (FP4/FP6) has no right answer: the codes written are reported, not judged.
- ``overflow``: finite inputs whose rounded value exceeds max. Implementation-defined: each
  implementation's mode (``saturate`` / ``nonsaturate``) is *observed* and then every such input is
  compared with the codec in that mode.
- ``inf``: +-inf. Also implementation-defined, observed the same way.
- ``no_encoding``: unsigned formats only: negative inputs, and for E8M0 also zero and -0.0, which
  the format cannot represent.
  What an implementation does there (NaN, absolute value, smallest value...) is observed.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable

import torch

from .codec import decode_table, encode
from .formats import Fp8Format, get_format

__all__ = [
    "Implementation",
    "torch_cast",
    "ml_dtypes_cast",
    "implementations",
    "all_16bit_inputs",
    "float32_structured_inputs",
    "classify",
    "CastReport",
    "check_cast",
    "describe_inputs",
    "summarize_reports",
    "merge_reports",
    "sweep_float32",
    "overflow_threshold",
]

@dataclasses.dataclass(frozen=True)
class Implementation:
    name: str  # e.g. "torch-cpu", "ml_dtypes"
    version: str
    cast: Callable[[torch.Tensor], torch.Tensor]  # input tensor -> uint8 codes, same shape, on CPU

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def torch_cast(fmt: str | Fp8Format, device: str = "cpu") -> Implementation | None:
    """torch's native cast on ``device``; None if this torch has no such dtype."""
    fmt = get_format(fmt)
    dtype = fmt.torch_dtype()
    if dtype is None:
        return None

    def cast(x: torch.Tensor) -> torch.Tensor:
        return x.to(device).to(dtype).view(torch.uint8).cpu()

    return Implementation(f"torch-{torch.device(device).type}", torch.__version__, cast)


def ml_dtypes_cast(fmt: str | Fp8Format) -> Implementation | None:
    """ml_dtypes' numpy cast (a second, independent implementation); None if unavailable."""
    fmt = get_format(fmt)
    target = fmt.ml_dtype()
    if target is None:
        return None
    import ml_dtypes
    import numpy as np

    def cast(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.bfloat16:
            # ml_dtypes' own bfloat16 -> fp8 conversion, not via float32
            arr = x.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            arr = x.contiguous().numpy()
        with np.errstate(invalid="ignore", over="ignore"):
            return torch.from_numpy(arr.astype(target).view(np.uint8).copy())

    return Implementation("ml_dtypes", ml_dtypes.__version__, cast)


def implementations(fmt: str | Fp8Format, devices: tuple[str, ...] = ("cpu",)) -> list[Implementation]:
    """Every implementation of ``fmt`` available on this install."""
    found = [torch_cast(fmt, d) for d in devices] + [ml_dtypes_cast(fmt)]
    return [i for i in found if i is not None]


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
def all_16bit_inputs(dtype: torch.dtype) -> torch.Tensor:
    """All 65,536 bit patterns of bfloat16 or float16, in pattern order."""
    if dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"dtype: expected torch.bfloat16 or torch.float16, got {dtype}")
    return torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)


def _f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


def _f32_from_bits(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.int32).view(torch.float32)


def float32_structured_inputs(fmt: str | Fp8Format) -> dict[str, torch.Tensor]:
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
    fmt = get_format(fmt)
    vals = torch.tensor(fmt.all_values(), dtype=torch.float64)
    finite = vals[torch.isfinite(vals)]
    pos = torch.unique(finite[finite >= 0])  # sorted
    if fmt.has_zero and pos[0] != 0:
        raise AssertionError("zero missing from a format that has it")
    mids = (pos[1:] + pos[:-1]) / 2  # exact in float64, and representable in float32
    mids32 = mids.float()
    mids_bits = _f32_bits(mids32)
    below = _f32_from_bits(mids_bits - 1)
    above = _f32_from_bits(mids_bits + 1)
    top = pos[-1]
    ulp_top = top - pos[-2]
    over_mid = torch.tensor([top + ulp_top / 2], dtype=torch.float64).float()
    boundary = torch.cat([
        torch.tensor([top], dtype=torch.float32),
        over_mid,
        _f32_from_bits(_f32_bits(over_mid) - 1),
        _f32_from_bits(_f32_bits(over_mid) + 1),
        torch.tensor([float(top + ulp_top), float(top) * 2, float(top) * 1000, 3.4028234663852886e38]).float(),
    ])
    tiny = fmt.min_subnormal
    sub = torch.linspace(0, 2 * fmt.min_normal, 4097, dtype=torch.float64).float()
    half_tiny = torch.tensor([tiny / 2], dtype=torch.float64).float()
    sub = torch.cat([sub, half_tiny, _f32_from_bits(_f32_bits(half_tiny) - 1),
                     _f32_from_bits(_f32_bits(half_tiny) + 1), torch.tensor([tiny / 4, tiny * 0.75])])
    specials = _f32_from_bits(torch.tensor([
        0x00000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FA00000,
        0x00000001, 0x00400000, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800000, 0x3F800001,
    ], dtype=torch.int64))

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


# --------------------------------------------------------------------------------------------
# classification and comparison
# --------------------------------------------------------------------------------------------
def _is_nan_code(codes: torch.Tensor, fmt: Fp8Format) -> torch.Tensor:
    nan_table = torch.isnan(decode_table(fmt, codes.device))
    if fmt.bits == 8:
        return torch.index_select(nan_table, 0, codes.reshape(-1).int()).view(codes.shape)
    # a narrow format: a byte above its code range is no code at all (so not its NaN)
    idx = codes.reshape(-1).int()
    inside = idx < fmt.n_codes
    return (torch.index_select(nan_table, 0, idx.clamp(max=fmt.n_codes - 1)) & inside).view(codes.shape)


def _encode(x: torch.Tensor, fmt: Fp8Format, saturate: bool) -> torch.Tensor:
    """The codec's codes; NaN inputs of a format without NaN (which the codec refuses: they have
    no code) read as zero here and are judged by their own class."""
    if not fmt.has_nan:
        x = x.masked_fill(torch.isnan(x), 0)
    return encode(x, fmt, saturate=saturate)


def _count(mask: torch.Tensor) -> int:
    return int(torch.count_nonzero(mask))


def classify(x: torch.Tensor, fmt: str | Fp8Format) -> dict[str, torch.Tensor]:
    """Boolean masks, one per input class (see module docstring), from the codec alone."""
    return _classify(x, get_format(fmt))[0]


def _classify(x: torch.Tensor, fmt: Fp8Format) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``classify``'s masks and the codec's non-saturating codes it computed on the way (what
    ``check_cast`` compares with)."""
    xf = x.float()
    nan = torch.isnan(xf)
    inf = torch.isinf(xf)
    if fmt.signed:
        no_encoding = torch.zeros_like(nan)
    else:
        # negatives (-inf included), and zero and -0.0 where the format has no zero (E8M0); the
        # classes are disjoint
        no_encoding = ((xf < 0) if fmt.has_zero else ((xf <= 0) | torch.signbit(xf))) & ~nan
        inf = inf & ~no_encoding
    rounded_nonsat = _encode(x, fmt, saturate=False)
    rounded_sat = _encode(x, fmt, saturate=True)
    overflow = ~nan & ~inf & ~no_encoding & (rounded_nonsat != rounded_sat)
    in_range = ~(nan | inf | no_encoding | overflow)
    masks = {"in_range": in_range, "nan": nan, "overflow": overflow, "inf": inf, "no_encoding": no_encoding}
    return masks, rounded_nonsat


def _codes_equal(a: torch.Tensor, b: torch.Tensor, fmt: Fp8Format) -> torch.Tensor:
    """Equal codes, or both NaN (NaN payloads are implementation-defined)."""
    return (a == b) | (_is_nan_code(a, fmt) & _is_nan_code(b, fmt))


def _fmt_input(v: torch.Tensor) -> str:
    if v.dtype == torch.float32:
        bits = int(v.view(torch.int32).item()) & 0xFFFFFFFF
        return f"0x{bits:08x} ({v.item()!r})"
    bits = int(v.view(torch.int16).item()) & 0xFFFF
    return f"0x{bits:04x} ({float(v.float().item())!r})"


def describe_inputs(x: torch.Tensor, got: torch.Tensor, want: torch.Tensor, fmt: Fp8Format,
                    idx: torch.Tensor, limit: int = 8) -> list[str]:
    """One line per differing input: input bits and value, expected code and value, got."""
    table = decode_table(fmt)

    def value(code: int) -> str:
        return repr(table[code].item()) if code < fmt.n_codes else f"not a {fmt.bits}-bit code"

    lines = []
    for i in idx[:limit].tolist():
        g, w = int(got[i]), int(want[i])
        lines.append(f"input {_fmt_input(x[i])}: expected 0x{w:02x} ({value(w)}), got 0x{g:02x} ({value(g)})")
    return lines


def _observe_mode(got: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, fmt: Fp8Format) -> str:
    """Which codec mode explains ``got`` on the inputs in ``mask``."""
    if not bool(mask.any()):
        return "n/a"
    xs, gs = x[mask], got[mask]
    for mode, sat in (("saturate", True), ("nonsaturate", False)):
        if bool(_codes_equal(gs, _encode(xs, fmt, saturate=sat), fmt).all()):
            return mode
    return "mixed"


def _observe_no_encoding(got: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, fmt: Fp8Format) -> str:
    """E8M0 zero/negative inputs: what the implementation does with them, as words.

    Only inputs that tell the candidates apart count: for negatives, those whose absolute value
    encodes to a code that is neither NaN nor the smallest (so ``abs``, ``nan`` and ``min`` differ).
    """
    if not bool(mask.any()):
        return "n/a"
    xs, gs = x[mask].float(), got[mask]
    abs_codes = encode(xs.abs(), fmt)
    informative = {
        "zero": xs == 0,
        "negative": (xs < 0) & ~_is_nan_code(abs_codes, fmt) & (abs_codes != 0),
    }
    words = []
    for name, sub in informative.items():
        if not bool(sub.any()):
            continue
        g = gs[sub]
        if bool(_is_nan_code(g, fmt).all()):
            words.append(f"{name}->nan")
        elif bool((g == 0).all()):
            words.append(f"{name}->min")
        elif bool(_codes_equal(g, abs_codes[sub], fmt).all()):
            words.append(f"{name}->abs")
        else:
            words.append(f"{name}->mixed")
    return ",".join(words) or "n/a"


@dataclasses.dataclass
class CastReport:
    """The outcome of comparing one implementation with the codec on one input set."""

    impl: str
    fmt: str
    inputs: str
    counts: dict[str, int]
    in_range_mismatches: int
    nan_not_nan: int
    overflow_mode: str
    inf_mode: str
    no_encoding: str
    nan_codes: list[str]
    mode_mismatches: int  # out-of-range inputs that differ from the codec in the observed mode
    failures: list[str]  # readable lines for the first differing inputs

    @property
    def ok(self) -> bool:
        return not (self.in_range_mismatches or self.nan_not_nan or self.mode_mismatches)

    def summary(self) -> str:
        return (f"{self.inputs} -> {self.fmt} [{self.impl}]: {sum(self.counts.values())} inputs, "
                f"{self.counts['in_range']} in range, {self.in_range_mismatches} in-range mismatches; "
                f"overflow={self.overflow_mode}, inf={self.inf_mode}, nan codes={'/'.join(self.nan_codes) or 'n/a'}"
                + (f", no-encoding: {self.no_encoding}" if self.no_encoding != "n/a" else ""))

    def failure_message(self) -> str:
        return "\n".join([self.summary(), *self.failures])


def check_cast(impl: Implementation, x: torch.Tensor, fmt: str | Fp8Format, inputs: str = "inputs",
               got: torch.Tensor | None = None) -> CastReport:
    """Cast ``x`` with ``impl`` (unless ``got`` is given) and compare with the codec."""
    fmt = get_format(fmt)
    x = x.reshape(-1)
    got = impl.cast(x).reshape(-1) if got is None else got.reshape(-1)
    cls, want = _classify(x, fmt)
    failures: list[str] = []

    bad = cls["in_range"] & ~_codes_equal(got, want, fmt)
    in_range_bad = _count(bad)
    if in_range_bad:
        failures.append(f"in-range inputs that differ from the codec ({in_range_bad}), {impl}:")
        failures += describe_inputs(x, got, want, fmt, bad.nonzero().flatten())

    # a format without NaN (FP4/FP6): what NaN becomes is the implementation's choice, reported
    # in nan_codes, not judged
    nan_bad_mask = cls["nan"] & ~_is_nan_code(got, fmt) if fmt.has_nan else torch.zeros_like(cls["nan"])
    if bool(nan_bad_mask.any()):
        failures.append(f"NaN inputs that did not give NaN ({_count(nan_bad_mask)}), {impl}:")
        failures += describe_inputs(x, got, want, fmt, nan_bad_mask.nonzero().flatten())

    overflow_mode = _observe_mode(got, x, cls["overflow"], fmt)
    inf_mode = _observe_mode(got, x, cls["inf"], fmt)
    mode_bad = 0
    for name, mode in (("overflow", overflow_mode), ("inf", inf_mode)):
        if mode == "mixed":
            # no single mode explains them: show where the non-saturating codec disagrees
            m = cls[name] & ~_codes_equal(got, want, fmt)
            mode_bad += _count(m)
            failures.append(f"{name} inputs follow neither mode ({_count(m)} differ from non-saturating), {impl}:")
            failures += describe_inputs(x, got, want, fmt, m.nonzero().flatten())

    no_encoding = _observe_no_encoding(got, x, cls["no_encoding"], fmt)
    if "mixed" in no_encoding:
        m = cls["no_encoding"]
        mode_bad += _count(m)
        failures.append(f"zero/negative inputs handled inconsistently ({no_encoding}), {impl}:")
        failures += describe_inputs(x, got, want, fmt, m.nonzero().flatten())

    nan_codes = sorted({f"0x{int(c):02x}" for c in got[cls["nan"]].unique().tolist()})
    return CastReport(
        impl=str(impl), fmt=fmt.name, inputs=inputs,
        counts={k: _count(v) for k, v in cls.items()},
        in_range_mismatches=in_range_bad, nan_not_nan=_count(nan_bad_mask),
        overflow_mode=overflow_mode, inf_mode=inf_mode,
        no_encoding=no_encoding,
        nan_codes=nan_codes, mode_mismatches=mode_bad, failures=failures,
    )


def merge_reports(reports: list[CastReport], inputs: str | None = None) -> CastReport:
    """One report for many runs of one implementation and format (chunks, hypothesis examples)."""
    if not reports:
        raise ValueError("reports: expected at least one CastReport")
    first = reports[0]
    if any((r.impl, r.fmt) != (first.impl, first.fmt) for r in reports):
        raise ValueError("reports: expected reports of one implementation and format")

    def modes(attr: str) -> str:
        return "|".join(sorted({getattr(r, attr) for r in reports} - {"n/a"})) or "n/a"

    return CastReport(
        impl=first.impl, fmt=first.fmt, inputs=inputs or first.inputs,
        counts={k: sum(r.counts[k] for r in reports) for k in first.counts},
        in_range_mismatches=sum(r.in_range_mismatches for r in reports),
        nan_not_nan=sum(r.nan_not_nan for r in reports),
        overflow_mode=modes("overflow_mode"), inf_mode=modes("inf_mode"), no_encoding=modes("no_encoding"),
        nan_codes=sorted({c for r in reports for c in r.nan_codes}),
        mode_mismatches=sum(r.mode_mismatches for r in reports),
        failures=[line for r in reports for line in r.failures][:20],
    )


def summarize_reports(reports: list[CastReport]) -> list[str]:
    """One line per (implementation, format): how many inputs were compared and what was observed.

    Modes seen on different input sets are joined; two different modes for one implementation
    and format (say ``saturate|nonsaturate``) mean its behaviour depends on the input dtype.
    """
    groups: dict[tuple[str, str], list[CastReport]] = {}
    for r in reports:
        groups.setdefault((r.impl, r.fmt), []).append(r)

    def joined(values, sep="|") -> str:
        seen = sorted({w for v in values for w in re.split(r"[|,]", v) if w not in ("n/a", "")})
        return sep.join(seen) or "n/a"

    lines = []
    width = max([24, *(len(impl) for impl, _ in groups)])
    for (impl, fmt), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        total = sum(sum(r.counts.values()) for r in rs)
        in_range = sum(r.counts["in_range"] for r in rs)
        bad = sum(r.in_range_mismatches + r.nan_not_nan + r.mode_mismatches for r in rs)
        line = (f"{fmt:9s} {impl:{width}s} {total:>12,} inputs ({in_range:,} in range): {bad} mismatches; "
                f"overflow={joined(r.overflow_mode for r in rs)} inf={joined(r.inf_mode for r in rs)} "
                f"nan={joined(c for r in rs for c in r.nan_codes)}")
        no_enc = joined((r.no_encoding for r in rs), sep=",")
        if no_enc != "n/a":
            line += f" no-encoding={no_enc}"
        lines.append(line)
    return lines


# --------------------------------------------------------------------------------------------
# the 2^32 float32 sweep: whole chunks of one class checked at the cost of the cast itself
# --------------------------------------------------------------------------------------------
_INF_BITS = 0x7F800000


@functools.cache
def overflow_threshold(fmt: Fp8Format) -> int:
    """The smallest float32 magnitude bit pattern that overflows ``fmt`` when rounded to nearest
    (the codec's saturating and non-saturating results differ from there up to inf), found by
    bisection with the codec: every larger finite pattern overflows too."""
    def overflows(a: int) -> bool:
        x = torch.tensor([a], dtype=torch.int32).view(torch.float32)
        return bool(_encode(x, fmt, False)[0] != _encode(x, fmt, True)[0])

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
    if a.dtype == b.dtype == torch.uint8 and a.numel() % 8 == 0 and all(
            t.is_contiguous() and t.storage_offset() % 8 == 0 for t in (a, b)):
        return torch.equal(a.view(torch.int64), b.view(torch.int64))
    return torch.equal(a, b)


def _homogeneous_report(impl: Implementation, fmt: Fp8Format, inputs: str, x: torch.Tensor,
                        got: torch.Tensor, a_lo: int, a_hi: int, negative: bool) -> CastReport | None:
    """The report for a chunk of consecutive float32 patterns that lie in one input class, at the
    cost of one codec pass and one comparison; None when the chunk is mixed, or does not match
    the one expected answer (the caller then runs the full ``check_cast`` and its readable lines)."""
    n = x.numel()
    counts = dict.fromkeys(("in_range", "nan", "overflow", "inf", "no_encoding"), 0)
    base = {"impl": str(impl), "fmt": fmt.name, "inputs": inputs, "in_range_mismatches": 0, "nan_not_nan": 0,
            "overflow_mode": "n/a", "inf_mode": "n/a", "no_encoding": "n/a", "nan_codes": [],
            "mode_mismatches": 0, "failures": []}
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
        abs_codes = _encode(x.abs(), fmt, False)
        if a_lo == 0 or not bool((~_is_nan_code(abs_codes, fmt) & (abs_codes != 0)).all()):
            return None  # -0.0, or negatives whose abs cannot tell the words apart: the full check
        # the words are exclusive here (the abs codes are neither NaN nor zero), so the first
        # code names the only one that can fit the chunk
        first = int(got[0])
        if first < fmt.n_codes and fmt.is_nan_code(first):
            word, fits = "negative->nan", bool(_is_nan_code(got, fmt).all())
        elif first == 0:
            word, fits = "negative->min", bool((got == 0).all())
        else:
            word, fits = "negative->abs", _same_codes(got, abs_codes)
        if not fits:
            return None
        counts["no_encoding"] = n
        return CastReport(counts=counts, **{**base, "no_encoding": word})
    threshold = overflow_threshold(fmt)
    if a_hi < threshold:  # all in range: one codec pass, equal or not
        if not _same_codes(got, _encode(x, fmt, False)):
            return None
        counts["in_range"] = n
        return CastReport(counts=counts, **base)
    if a_lo >= threshold:  # all finite overflow of one sign: the codec's answer is one code per mode
        sign = (1 << (fmt.bits - 1)) if fmt.signed and negative else 0
        saturated = (got == (fmt.max_code | sign)).all()
        if fmt.has_inf:
            overflowed = (got == (fmt.inf_codes[0] | sign)).all()
        else:
            overflowed = _is_nan_code(got, fmt).all() if fmt.has_nan else torch.tensor(False)
        for mode, fits in (("saturate", saturated), ("nonsaturate", overflowed)):
            if bool(fits):
                counts["overflow"] = n
                return CastReport(counts=counts, **{**base, "overflow_mode": mode})
    return None


def sweep_float32(impl: Implementation, fmt: str | Fp8Format, first: int = 0, count: int = 1 << 32,
                  chunk: int = 1 << 20) -> CastReport:
    """Every float32 bit pattern in ``[first, first + count)`` (as unsigned 32-bit patterns) cast
    by ``impl`` and compared with the codec, ``chunk`` at a time; one merged ``CastReport``.

    A chunk whose inputs are all in range, all NaN or all finite overflow is checked with one
    codec pass and one comparison; a chunk that mixes classes (or differs) goes through the full
    ``check_cast``, whose report says what differs. Chunks never straddle the sign bit."""
    fmt = get_format(fmt)
    if not (0 <= first and count > 0 and first + count <= 1 << 32 and first % chunk == 0 and count % chunk == 0):
        raise ValueError(f"first, count: expected a range of whole {chunk}-pattern chunks in [0, 2^32), "
                         f"got first={first}, count={count}")
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
