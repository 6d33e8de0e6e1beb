"""FP8 optimizer state: a float32 state tensor kept as E4M3 codes with one float32 scale per block.

From torchao's low-bit optimizers (``torchao.optim``, ``OptimStateFp8``, v0.18), as documented
there: the flattened state is cut into blocks of ``block_size`` (256 by default for AdamWFp8);
each block's scale is ``amax / 448`` (the E4M3 max), its amax clipped below at 1e-12 so an
all-zero block divides by something; elements are ``E4M3(x / scale)`` (round to nearest even;
``|x / scale| <= 448`` up to a rounding of the division, which RNE brings back to 448); the state
reads back as ``value(code) * scale``. Every step is float32 arithmetic, so the formula fixes the
bits. Nothing here calls torchao or a native float8 cast.
"""

from __future__ import annotations

import torch

from .codec import decode, encode
from .formats import E4M3FN
from .validate import positive_int, tensor

__all__ = ["AMAX_FLOOR", "quantize_state", "dequantize_state"]

AMAX_FLOOR = 1e-12


def quantize_state(x: torch.Tensor, block_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 E4M3 codes of ``x``'s shape, float32 scales: one per block of the flattened ``x``)."""
    tensor(x, "x", dtypes=(torch.float32,))
    positive_int(block_size, "block_size")
    if x.numel() % block_size:
        raise ValueError(f"x: {x.numel()} elements do not split into blocks of {block_size}")
    blocks = x.reshape(-1, block_size)
    scale = blocks.abs().amax(dim=-1).clamp(min=AMAX_FLOOR) / torch.tensor(E4M3FN.max, dtype=torch.float32)
    codes = encode(blocks / scale.unsqueeze(-1), E4M3FN, saturate=True)
    return codes.reshape(x.shape), scale


def dequantize_state(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``value(code) * scale`` per block, float32, ``codes``' shape."""
    tensor(codes, "codes", dtypes=(torch.uint8,))
    tensor(scale, "scale", dtypes=(torch.float32,))
    if scale.dim() != 1 or scale.numel() == 0 or codes.numel() % scale.numel():
        raise ValueError(f"scale: expected one value per block of codes, got shape {tuple(scale.shape)}")
    values = decode(codes, E4M3FN).to(torch.float32).reshape(scale.numel(), -1)
    return (values * scale.unsqueeze(-1)).reshape(codes.shape)
