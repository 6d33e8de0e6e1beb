"""Error measures used to judge FP8 results against a reference.

- ``sqnr``: signal-to-quantization-noise ratio in dB, ``20 log10(||ref|| / ||ref - x||)``
  (torchao's ``compute_error``).
- ``calc_diff``: DeepGEMM's GEMM check, ``1 - 2 sum(x y) / sum(x^2 + y^2)`` (< 1e-3 passes).
- ``max_rel_error``: ``max |x - ref| / |ref|`` over elements where ``ref != 0``.
- ``ulp_distance``: how many representable values of a format lie between two codes.
All computed in float64.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .formats import FloatFormat, get_format
from .validate import tensor

__all__ = ["sqnr", "calc_diff", "max_rel_error", "ulp_distance"]


def _pair(x: Any, ref: Any) -> tuple[torch.Tensor, torch.Tensor]:
    tensor(x, "x")
    tensor(ref, "ref")
    if x.shape != ref.shape:
        raise ValueError(f"x, ref: expected equal shapes, got {tuple(x.shape)} and {tuple(ref.shape)}")
    if x.numel() == 0:
        raise ValueError("x, ref: expected non-empty tensors (an error measure of nothing is undefined)")
    return x.detach().double(), ref.detach().double()


def sqnr(x: torch.Tensor, ref: torch.Tensor) -> float:
    """SQNR of ``x`` against ``ref`` in dB; inf when they are equal."""
    x, ref = _pair(x, ref)
    noise = torch.linalg.vector_norm(ref - x).item()
    signal = torch.linalg.vector_norm(ref).item()
    if noise == 0:
        return math.inf
    return 20 * math.log10(signal / noise) if signal > 0 else -math.inf


def calc_diff(x: torch.Tensor, ref: torch.Tensor) -> float:
    """DeepGEMM's similarity measure: 0 for identical tensors, small is good."""
    x, ref = _pair(x, ref)
    denom = (x * x + ref * ref).sum().item()
    return 0.0 if denom == 0 else 1 - 2 * (x * ref).sum().item() / denom


def max_rel_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = _pair(x, ref)
    nz = ref != 0
    return ((x - ref).abs()[nz] / ref.abs()[nz]).max().item() if bool(nz.any()) else 0.0


def ulp_distance(a: torch.Tensor, b: torch.Tensor, fmt: str | FloatFormat) -> torch.Tensor:
    """Number of representable steps between codes ``a`` and ``b`` of a signed format
    (+0 and -0 are the same point; NaN codes give -1)."""
    fmt = get_format(fmt)
    tensor(a, "a", dtypes=(torch.uint8,))
    tensor(b, "b", dtypes=(torch.uint8,))
    if not fmt.signed:
        ia, ib = a.long(), b.long()
    else:
        # map sign-magnitude codes onto a monotone integer line
        def line(c):
            c = c.long()
            mag = c & 0x7F
            return torch.where((c & 0x80) != 0, -mag, mag)

        ia, ib = line(a), line(b)
    nan = torch.zeros(256, dtype=torch.bool)
    nan[list(fmt.nan_codes)] = True
    d = (ia - ib).abs()
    return torch.where(nan[a.long()] | nan[b.long()], torch.full_like(d, -1), d)
