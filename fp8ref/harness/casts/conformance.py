"""Compare an implementation's FP8 casts with the codec, and observe what it does out of range.

An implementation (``implementations``) casts; this module classifies each input from the format
definition alone (via the codec), compares, and reports. The tests and the behaviour profile use
it; it is *not* the reference (that is ``codec``).

Each input is put in one class, from the format definition alone (via the codec):
- ``in_range``: finite and representable after rounding (for E8M0 also positive). Must match the
  codec bitwise on every implementation, but where a known deviation from the definition
  (``deviations``) of that implementation explains the difference: counted and reported instead.
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
from collections import Counter
from collections.abc import Iterable

import torch

from ...reference.codec import decode_table, encode
from ...reference.formats import FloatFormat, as_format
from ...reference.validate import Choice
from . import deviations
from .implementations import Implementation

__all__ = [
    "Mode",
    "classify",
    "CastReport",
    "check_cast",
    "describe_inputs",
    "summarize_reports",
    "merge_reports",
    "is_nan_code",
    "encode_or_zero",
]


def is_nan_code(codes: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    nan_table = torch.isnan(decode_table(fmt, codes.device))
    if fmt.bits == 8:
        return torch.index_select(nan_table, 0, codes.reshape(-1).int()).view(codes.shape)
    # a narrow format: a byte above its code range is no code at all (so not its NaN)
    idx = codes.reshape(-1).int()
    inside = idx < fmt.n_codes
    return (torch.index_select(nan_table, 0, idx.clamp(max=fmt.n_codes - 1)) & inside).view(codes.shape)


def encode_or_zero(x: torch.Tensor, fmt: FloatFormat, saturate: bool) -> torch.Tensor:
    """The codec's codes; NaN inputs of a format without NaN (which the codec refuses: they have
    no code) read as zero here and are judged by their own class."""
    if not fmt.has_nan:
        x = x.masked_fill(torch.isnan(x), 0)
    return encode(x, fmt, saturate=saturate)


def _count(mask: torch.Tensor) -> int:
    return int(torch.count_nonzero(mask))


def classify(x: torch.Tensor, fmt: FloatFormat) -> dict[str, torch.Tensor]:
    """Boolean masks, one per input class (see module docstring), from the codec alone."""
    return _classify(x, as_format(fmt))[0]


def _classify(x: torch.Tensor, fmt: FloatFormat) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
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
    rounded_nonsat = encode_or_zero(x, fmt, saturate=False)
    rounded_sat = encode_or_zero(x, fmt, saturate=True)
    overflow = ~nan & ~inf & ~no_encoding & (rounded_nonsat != rounded_sat)
    in_range = ~(nan | inf | no_encoding | overflow)
    masks = {"in_range": in_range, "nan": nan, "overflow": overflow, "inf": inf, "no_encoding": no_encoding}
    return masks, rounded_nonsat


def _codes_equal(a: torch.Tensor, b: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Equal codes, or both NaN (NaN payloads are implementation-defined)."""
    return (a == b) | (is_nan_code(a, fmt) & is_nan_code(b, fmt))


def _fmt_input(v: torch.Tensor) -> str:
    if v.dtype == torch.float32:
        bits = int(v.view(torch.int32).item()) & 0xFFFFFFFF
        return f"0x{bits:08x} ({v.item()!r})"
    bits = int(v.view(torch.int16).item()) & 0xFFFF
    return f"0x{bits:04x} ({float(v.float().item())!r})"


def describe_inputs(
    x: torch.Tensor, got: torch.Tensor, want: torch.Tensor, fmt: FloatFormat, idx: torch.Tensor, limit: int = 8
) -> list[str]:
    """One line per differing input: input bits and value, expected code and value, got."""
    table = decode_table(fmt)

    def value(code: int) -> str:
        return repr(table[code].item()) if code < fmt.n_codes else f"not a {fmt.bits}-bit code"

    lines = []
    for i in idx[:limit].tolist():
        g, w = int(got[i]), int(want[i])
        lines.append(f"input {_fmt_input(x[i])}: expected 0x{w:02x} ({value(w)}), got 0x{g:02x} ({value(g)})")
    return lines


class Mode(Choice):
    """What an implementation does with out-of-range inputs (finite overflow, or +-inf)."""

    SATURATE = "saturate"  # the largest finite code of the input's sign
    NONSATURATE = "nonsaturate"  # inf where the format has it, else NaN
    MIXED = "mixed"  # neither explains every input: a failure


def _observe_mode(got: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, fmt: FloatFormat) -> tuple[Mode, ...]:
    """Which codec mode explains ``got`` on the inputs in ``mask``: one, or none without such inputs."""
    if not bool(mask.any()):
        return ()
    xs, gs = x[mask], got[mask]
    for mode, sat in ((Mode.SATURATE, True), (Mode.NONSATURATE, False)):
        if bool(_codes_equal(gs, encode_or_zero(xs, fmt, saturate=sat), fmt).all()):
            return (mode,)
    return (Mode.MIXED,)


def _observe_no_encoding(got: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, fmt: FloatFormat) -> tuple[str, ...]:
    """E8M0 zero/negative inputs: what the implementation does with them, as ``input->outcome``
    words (outcome ``nan``, ``min``, ``abs`` or ``mixed``).

    Only inputs that tell the candidates apart count: for negatives, those whose absolute value
    encodes to a code that is neither NaN nor the smallest (so ``abs``, ``nan`` and ``min`` differ).
    """
    if not bool(mask.any()):
        return ()
    xs, gs = x[mask].float(), got[mask]
    abs_codes = encode(xs.abs(), fmt)
    informative = {
        "zero": xs == 0,
        "negative": (xs < 0) & ~is_nan_code(abs_codes, fmt) & (abs_codes != 0),
    }
    words = []
    for name, sub in informative.items():
        if not bool(sub.any()):
            continue
        g = gs[sub]
        if bool(is_nan_code(g, fmt).all()):
            words.append(f"{name}->nan")
        elif bool((g == 0).all()):
            words.append(f"{name}->min")
        elif bool(_codes_equal(g, abs_codes[sub], fmt).all()):
            words.append(f"{name}->abs")
        else:
            words.append(f"{name}->mixed")
    return tuple(words)


def _joined(values: tuple[str, ...], sep: str) -> str:
    return sep.join(values) or "n/a"


@dataclasses.dataclass
class CastReport:
    """The outcome of comparing one implementation with the codec on one input set."""

    impl: str
    fmt: str
    inputs: str
    counts: dict[str, int]
    in_range_mismatches: int
    nan_not_nan: int
    # what was observed, as sorted values (empty: no such input): Mode values for overflow and
    # inf, ``input->outcome`` words for the inputs an unsigned format cannot encode
    overflow_modes: tuple[str, ...]
    inf_modes: tuple[str, ...]
    no_encoding_words: tuple[str, ...]
    nan_codes: list[str]
    mode_mismatches: int  # out-of-range inputs that differ from the codec in the observed mode
    failures: list[str]  # readable lines for the first differing inputs
    # in-range mismatches a known deviation from the definition explains (``deviations``), by key
    deviations: dict[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:  # (lists after a JSON round trip, as from an xdist worker)
        # one canonical order: modes alphabetically, words for zero before words for negatives
        for name in ("overflow_modes", "inf_modes", "no_encoding_words"):
            values = {str(v) for v in getattr(self, name)}
            setattr(self, name, tuple(sorted(values, key=lambda w: (not w.startswith("zero"), w))))

    @property
    def overflow_mode(self) -> str:
        """``saturate``, ``nonsaturate``, ``mixed``, several joined by ``|``, or ``n/a``."""
        return _joined(self.overflow_modes, "|")

    @property
    def inf_mode(self) -> str:
        return _joined(self.inf_modes, "|")

    @property
    def no_encoding(self) -> str:
        """``negative->abs,zero->min`` and the like, or ``n/a``."""
        return _joined(self.no_encoding_words, ",")

    @property
    def ok(self) -> bool:
        return not (self.in_range_mismatches or self.nan_not_nan or self.mode_mismatches)

    def summary(self) -> str:
        return (
            f"{self.inputs} -> {self.fmt} [{self.impl}]: {sum(self.counts.values())} inputs, "
            f"{self.counts['in_range']} in range, {self.in_range_mismatches} in-range mismatches; "
            f"overflow={self.overflow_mode}, inf={self.inf_mode}, nan codes={'/'.join(self.nan_codes) or 'n/a'}"
            + (f", no-encoding: {self.no_encoding}" if self.no_encoding != "n/a" else "")
            + "".join(f", known deviation {k}: {n} inputs" for k, n in sorted(self.deviations.items()))
        )

    def failure_message(self) -> str:
        return "\n".join([self.summary(), *self.failures])


def check_cast(
    impl: Implementation,
    x: torch.Tensor,
    fmt: FloatFormat,
    inputs: str = "inputs",
    got: torch.Tensor | None = None,
) -> CastReport:
    """Cast ``x`` with ``impl`` (unless ``got`` is given) and compare with the codec."""
    fmt = as_format(fmt)
    x = x.reshape(-1)
    got = impl.cast(x).reshape(-1) if got is None else got.reshape(-1)
    cls, want = _classify(x, fmt)
    failures: list[str] = []

    bad = cls["in_range"] & ~_codes_equal(got, want, fmt)
    explained, deviation_counts = deviations.explain(impl, fmt, x, got, bad)
    bad &= ~explained
    in_range_bad = _count(bad)
    if in_range_bad:
        failures.append(f"in-range inputs that differ from the codec ({in_range_bad}), {impl}:")
        failures += describe_inputs(x, got, want, fmt, bad.nonzero().flatten())

    # a format without NaN (FP4/FP6): what NaN becomes is the implementation's choice, reported
    # in nan_codes, not judged
    nan_bad_mask = cls["nan"] & ~is_nan_code(got, fmt) if fmt.has_nan else torch.zeros_like(cls["nan"])
    if bool(nan_bad_mask.any()):
        failures.append(f"NaN inputs that did not give NaN ({_count(nan_bad_mask)}), {impl}:")
        failures += describe_inputs(x, got, want, fmt, nan_bad_mask.nonzero().flatten())

    overflow_modes = _observe_mode(got, x, cls["overflow"], fmt)
    inf_modes = _observe_mode(got, x, cls["inf"], fmt)
    mode_bad = 0
    for name, modes in (("overflow", overflow_modes), ("inf", inf_modes)):
        if Mode.MIXED in modes:
            # no single mode explains them: show where the non-saturating codec disagrees
            m = cls[name] & ~_codes_equal(got, want, fmt)
            mode_bad += _count(m)
            failures.append(f"{name} inputs follow neither mode ({_count(m)} differ from non-saturating), {impl}:")
            failures += describe_inputs(x, got, want, fmt, m.nonzero().flatten())

    no_encoding = _observe_no_encoding(got, x, cls["no_encoding"], fmt)
    if any(word.endswith("->mixed") for word in no_encoding):
        m = cls["no_encoding"]
        mode_bad += _count(m)
        failures.append(f"zero/negative inputs handled inconsistently ({_joined(no_encoding, ',')}), {impl}:")
        failures += describe_inputs(x, got, want, fmt, m.nonzero().flatten())

    nan_codes = sorted({f"0x{int(c):02x}" for c in got[cls["nan"]].unique().tolist()})
    return CastReport(
        impl=str(impl),
        fmt=fmt.name,
        inputs=inputs,
        counts={k: _count(v) for k, v in cls.items()},
        in_range_mismatches=in_range_bad,
        nan_not_nan=_count(nan_bad_mask),
        overflow_modes=overflow_modes,
        inf_modes=inf_modes,
        no_encoding_words=no_encoding,
        nan_codes=nan_codes,
        mode_mismatches=mode_bad,
        failures=failures,
        deviations=deviation_counts,
    )


def merge_reports(reports: list[CastReport], inputs: str | None = None) -> CastReport:
    """One report for many runs of one implementation and format (chunks, hypothesis examples)."""
    if not reports:
        raise ValueError("reports: expected at least one CastReport")
    first = reports[0]
    if any((r.impl, r.fmt) != (first.impl, first.fmt) for r in reports):
        raise ValueError("reports: expected reports of one implementation and format")

    def union(attr: str) -> tuple[str, ...]:
        return tuple({v for r in reports for v in getattr(r, attr)})

    return CastReport(
        impl=first.impl,
        fmt=first.fmt,
        inputs=inputs or first.inputs,
        counts={k: sum(r.counts[k] for r in reports) for k in first.counts},
        in_range_mismatches=sum(r.in_range_mismatches for r in reports),
        nan_not_nan=sum(r.nan_not_nan for r in reports),
        overflow_modes=union("overflow_modes"),
        inf_modes=union("inf_modes"),
        no_encoding_words=union("no_encoding_words"),
        nan_codes=sorted({c for r in reports for c in r.nan_codes}),
        mode_mismatches=sum(r.mode_mismatches for r in reports),
        failures=[line for r in reports for line in r.failures][:20],
        deviations=_added([r.deviations for r in reports]),
    )


def _added(counts: list[dict[str, int]]) -> dict[str, int]:
    return dict(sum(map(Counter, counts), Counter()))


def summarize_reports(reports: list[CastReport]) -> list[str]:
    """One line per (implementation, format): how many inputs were compared and what was observed.

    Modes seen on different input sets are joined; two different modes for one implementation
    and format (say ``saturate|nonsaturate``) mean its behaviour depends on the input dtype.
    """
    groups: dict[tuple[str, str], list[CastReport]] = {}
    for r in reports:
        groups.setdefault((r.impl, r.fmt), []).append(r)

    def joined(values: Iterable[str], sep: str = "|") -> str:
        return _joined(tuple(sorted(set(values))), sep)

    lines = []
    width = max([24, *(len(impl) for impl, _ in groups)])
    for (impl, fmt), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        total = sum(sum(r.counts.values()) for r in rs)
        in_range = sum(r.counts["in_range"] for r in rs)
        bad = sum(r.in_range_mismatches + r.nan_not_nan + r.mode_mismatches for r in rs)
        line = (
            f"{fmt:9s} {impl:{width}s} {total:>12,} inputs ({in_range:,} in range): {bad} mismatches; "
            f"overflow={joined(m for r in rs for m in r.overflow_modes)} "
            f"inf={joined(m for r in rs for m in r.inf_modes)} "
            f"nan={joined(c for r in rs for c in r.nan_codes)}"
        )
        no_enc = joined((w for r in rs for w in r.no_encoding_words), sep=",")
        if no_enc != "n/a":
            line += f" no-encoding={no_enc}"
        for key, n in sorted(_added([r.deviations for r in rs]).items()):
            line += f"; deviates from the definition: {fmt}.{key} on {n:,} inputs"
        lines.append(line)
    return lines


def float64_rounding(impl: Implementation, fmt: FloatFormat) -> str:
    """How ``impl`` casts float64: ``once`` (to nearest, from the float64 value), ``through
    float32`` (rounded to float32 first: a double rounding), or ``other: ...`` (neither explains
    every input), judged on inputs where the two differ (``cast_inputs.float64_double_rounding_inputs``)."""
    from .cast_inputs import float64_double_rounding_inputs

    x, once, via = float64_double_rounding_inputs(fmt)
    got = impl.cast(x).reshape(-1)
    if torch.equal(got, once):
        return "once"
    if torch.equal(got, via):
        return "through float32"
    return (
        f"other: {int((got == once).sum())} of {x.numel()} inputs as once, {int((got == via).sum())} as through float32"
    )
