"""The input space around a cast: views of a tensor that are not contiguous or not at offset 0
(each must cast as its values laid out contiguously), and decodes of all 256 codes to a wider
dtype. Each check takes the cast, so tests/meta can pass a broken one, and returns the lines
that differ (empty when the implementation conforms). The conformance of the cast itself is
``fp8ref.harness.casts.conformance.check_cast``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...reference.codec import decode, encode
from ...reference.formats import FloatFormat


def layouts(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Views of one (64, 96) tensor that are not contiguous, or not at offset 0."""
    return {
        "transposed": x.t(),
        "column slice": x[:, 5:77],
        "every third column": x[:, ::3],
        "row slice at an offset": x[3:50],
        "as_strided": x.as_strided((20, 30), (97, 2), 7),
        "expanded": x[:1].expand(8, -1),
    }


def layout_mismatches(cast: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, fmt: FloatFormat) -> list[str]:
    """The views of ``x`` whose ``cast`` (a view -> uint8 codes) differs from the codec's codes of
    the same values laid out contiguously, on the in-range inputs."""
    bad = []
    for name, view in layouts(x).items():
        got, values = cast(view), view.contiguous()
        in_range = values.float().abs() <= fmt.max
        if not fmt.signed:
            in_range &= values.float() > 0
        if got.shape != values.shape or not torch.equal(got[in_range], encode(values, fmt)[in_range]):
            bad.append(name)
    return bad


def as_matrix(x: torch.Tensor, cols: int = 256) -> torch.Tensor:
    """A flat input set as a (rows, ``cols``) matrix for ``layouts``, padded at the end with its
    own first values so every input is in it (rows >= 64 so every layout's view fits)."""
    x = x.reshape(-1)
    rows = max(64, -(-x.numel() // cols))
    pad = rows * cols - x.numel()
    return torch.cat([x, x.repeat(-(-pad // max(x.numel(), 1)))[:pad]]).reshape(rows, cols)


def layout_bit_mismatches(cast: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> list[str]:
    """The views of ``x`` (``layouts``) whose ``cast`` (a tensor -> a tensor) is not bit for bit
    the cast of the same values laid out contiguously, on every input: overflow, +-inf and NaN
    (NaN codes and payloads) included. One line per view: how many elements differ, the first."""
    bad = []
    for name, view in layouts(x).items():
        got, want = cast(view), cast(view.contiguous())
        if got.shape != want.shape or got.dtype != want.dtype:
            bad.append(f"{name}: {tuple(got.shape)} {got.dtype}, contiguous {tuple(want.shape)} {want.dtype}")
            continue
        gb, wb = (t.contiguous().view(torch.uint8).reshape(*t.shape, -1) for t in (got, want))
        differ = (gb != wb).any(dim=-1)
        if bool(differ.any()):
            i = tuple(int(v) for v in differ.nonzero()[0])
            bad.append(f"{name}: {int(differ.sum())} elements, first {i}: input {view[i].item()!r}")
    return bad


def same_bits(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Equal values with equal signs (so -0.0 is not 0.0), or both NaN."""
    return ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))


def decode_mismatches(
    codes_to: Callable[[torch.Tensor], torch.Tensor], fmt: FloatFormat, target: torch.dtype
) -> list[str]:
    """One line per code (of all 256) whose decode to ``target`` by ``codes_to`` (uint8 codes ->
    target tensor) is not the format's exact value rounded once to ``target``."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = codes_to(codes)
    if got.dtype != target:
        return [f"decoded to {got.dtype}, not {target}"]
    want = decode(codes, fmt).double().to(target)
    bad = (~same_bits(got, want)).nonzero().flatten().tolist()
    return [f"0x{c:02x}: expected {want[c].item()!r}, got {got[c].item()!r}" for c in bad]
