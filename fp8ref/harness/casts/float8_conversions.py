"""Conversions that never leave float8 and copies into float8 tensors, as implementations the
cast conformance (``conformance.check_cast``) can judge.

A float8 -> float8 conversion has one right answer by the definition: the source code's exact
value (every float8 value is a float32) rounded once into the target, with the target's overflow
and NaN rules. So each source code's value, decoded by fp8ref's codec, is the input, and what the
install wrote is compared with the codec's encoding of it; overflow, inf and what an unsigned
target does with zero and negatives are observed, as for any cast. ``Tensor.copy_`` into a float8
tensor is a second spelling of the same conversion, from every float dtype and every float8 one.
"""

from __future__ import annotations

import torch

from ...reference.codec import decode
from ...reference.formats import FloatFormat, as_format
from .conformance import CastReport, check_cast
from .implementations import Implementation

__all__ = ["HOWS", "float8_codes", "float8_conversion", "check_float8_to_float8", "copy_into", "modes_word"]

HOWS = ("to", "copy_")


def float8_codes(src: FloatFormat) -> tuple[torch.Tensor, torch.Tensor]:
    """Every code of ``src`` (uint8) and its exact value (float32; NaN where the code is NaN)."""
    codes = torch.arange(src.n_codes, dtype=torch.uint8)
    return codes, decode(codes, src).to(torch.float32)


def copy_into(dst: FloatFormat, device: str = "cpu") -> Implementation:
    """``torch.empty(n, dtype=dst).copy_(x)``: x's dtype is whatever the caller passes."""
    dtype = dst.torch_dtype()

    def cast(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape, dtype=dtype, device=device)
        out.copy_(x.to(device))
        return out.view(torch.uint8).cpu()

    return Implementation(f"torch-{torch.device(device).type} copy_", torch.__version__, cast)


def float8_conversion(src: FloatFormat, dst: FloatFormat, how: str = "to", device: str = "cpu") -> Implementation:
    """The install's conversion of ``src`` codes (uint8) into ``dst``: ``to`` (``Tensor.to``) or
    ``copy_`` (into an empty ``dst`` tensor)."""
    src, dst = as_format(src), as_format(dst)
    if how not in HOWS:
        raise ValueError(f"how: expected one of {HOWS}, got {how!r}")
    sdt, ddt = src.torch_dtype(), dst.torch_dtype()
    if sdt is None or ddt is None:
        raise ValueError(f"src/dst: this torch has no dtype for {src.name if sdt is None else dst.name}")
    into = copy_into(dst, device)

    def cast(codes: torch.Tensor) -> torch.Tensor:
        x = codes.to(device).view(sdt)
        return x.to(ddt).view(torch.uint8).cpu() if how == "to" else into.cast(x)

    return Implementation(f"torch-{torch.device(device).type} {src.name}.{how}", torch.__version__, cast)


def check_float8_to_float8(
    src: FloatFormat, dst: FloatFormat, how: str = "to", device: str = "cpu", impl: Implementation | None = None
) -> CastReport:
    """Every ``src`` code converted into ``dst`` (by the install, or by ``impl``, which takes the
    source codes) against the codec's rounding of the code's exact value."""
    src, dst = as_format(src), as_format(dst)
    impl = impl if impl is not None else float8_conversion(src, dst, how, device)
    codes, values = float8_codes(src)
    got = impl.cast(codes)
    return check_cast(impl, values, dst, f"every {src.name} code", got=got)


def modes_word(r: CastReport) -> str:
    """The implementation-defined part of a report in one word list (for a profile value)."""
    words = [f"overflow={r.overflow_mode}", f"inf={r.inf_mode}", f"nan={'|'.join(r.nan_codes) or 'n/a'}"]
    if r.no_encoding != "n/a":
        words.append(f"no_encoding={r.no_encoding}")
    return " ".join(words)
