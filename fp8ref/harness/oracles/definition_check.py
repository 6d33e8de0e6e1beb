"""An encoder (the codec, or a stand-in for it) against the definition (``reference.definition``).

``compare_with_definition`` rounds one input set in one mode both ways and compares the *values*
(sign of zero included, NaN as NaN). Stochastic rounding is compared with the same random bits
given to both, three sets of them per input: random ones, and the two on either side of the
input's threshold ``t = ceil(p * 2^24)`` (``r = t - 1`` must go up, ``r = t`` must not), which pins
the probability of going up at exactly ``t / 2^24``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from ...reference.codec import decode
from ...reference.definition import SR_BITS, round_by_definition, sr_up_probability
from ...reference.formats import FloatFormat

__all__ = ["MODES", "DefinitionReport", "sr_bit_sets", "compare_with_definition", "compare_all_modes"]

# (rounding, saturate, which random bits): every mode the codec has, SR three times
MODES: tuple[tuple[str, bool, str], ...] = (
    ("rne", False, ""),
    ("rne", True, ""),
    ("rtz", False, ""),
    ("rtz", True, ""),
    ("sr", False, "random"),
    ("sr", True, "random"),
    ("sr", True, "below threshold"),
    ("sr", True, "at threshold"),
)

Encoder = Callable[..., torch.Tensor]  # (x, fmt, saturate=, rounding=, random_bits=) -> uint8 codes


@dataclasses.dataclass
class DefinitionReport:
    """One input set in one mode: how many inputs were compared and which differed."""

    oracle: str
    fmt: str
    inputs: str
    mode: str
    compared: int
    mismatches: int
    lines: list[str]

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def failure_message(self) -> str:
        head = f"{self.fmt} {self.inputs} [{self.mode}]: {self.mismatches} of {self.compared} differ from {self.oracle}"
        return "\n".join([head, *self.lines])


def sr_bit_sets(x: torch.Tensor, fmt: FloatFormat, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random bits for each input, and the bits just below and at its SR threshold."""
    gen = torch.Generator().manual_seed(seed)
    finite = torch.isfinite(x.double())
    p = sr_up_probability(torch.where(finite, x.double(), torch.zeros_like(x.double())), fmt)
    t = torch.ceil(p * 2.0**SR_BITS).to(torch.int64)  # exact: p * 2^24 is a float64 product by a power of 2
    top = (1 << SR_BITS) - 1
    return {
        "random": torch.randint(0, 1 << SR_BITS, x.shape, generator=gen, dtype=torch.int64),
        "below threshold": (t - 1).clamp(0, top),
        "at threshold": t.clamp(0, top),
    }


def _describe(x: torch.Tensor, got: torch.Tensor, want: torch.Tensor, bits: torch.Tensor | None, i: int) -> str:
    v = x[i]
    if v.dtype == torch.float32:
        pattern = f"0x{int(v.view(torch.int32)) & 0xFFFFFFFF:08x}"
    else:
        pattern = f"0x{int(v.view(torch.int16)) & 0xFFFF:04x}"
    r = "" if bits is None else f", r={int(bits[i])}"
    return f"input {pattern} ({float(v.float())!r}{r}): definition {want[i].item()!r}, got {got[i].item()!r}"


def compare_with_definition(
    encoder: Encoder,
    x: torch.Tensor,
    fmt: FloatFormat,
    *,
    rounding: str,
    saturate: bool,
    random_bits: torch.Tensor | None = None,
    inputs: str = "inputs",
    mode: str | None = None,
) -> DefinitionReport:
    """``decode(encoder(x, ...))`` against ``round_by_definition`` on ``x`` (flat)."""
    x = x.reshape(-1)
    kw = {"random_bits": random_bits} if rounding == "sr" else {}
    got = decode(encoder(x, fmt, saturate=saturate, rounding=rounding, **kw), fmt).double()
    want = round_by_definition(x, fmt, rounding=rounding, saturate=saturate, **kw)
    same = ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))
    bad = (~same).nonzero().flatten()
    lines = [_describe(x, got, want, random_bits, i) for i in bad[:6].tolist()]
    name = mode or f"{rounding}{' sat' if saturate else ''}"
    return DefinitionReport("the definition", fmt.name, inputs, name, x.numel(), bad.numel(), lines)


def compare_all_modes(encoder: Encoder, x: torch.Tensor, fmt: FloatFormat, inputs: str) -> list[DefinitionReport]:
    """``compare_with_definition`` in every mode of ``MODES``."""
    x = x.reshape(-1)
    bit_sets = sr_bit_sets(x, fmt)
    reports = []
    for rounding, saturate, bits in MODES:
        mode = f"{rounding}{' sat' if saturate else ''}{f' ({bits} bits)' if bits else ''}"
        reports.append(
            compare_with_definition(
                encoder,
                x,
                fmt,
                rounding=rounding,
                saturate=saturate,
                random_bits=bit_sets[bits] if bits else None,
                inputs=inputs,
                mode=mode,
            )
        )
    return reports
