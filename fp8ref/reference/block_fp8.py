"""FP8 block checkpoints as DeepSeek-V3 ships them and transformers' fine-grained FP8 reads and
writes them: E4M3 codes with one inverse scale per 128 x 128 block of a weight's last two dims
(``weight_scale_inv``), from the formats' definitions and the formulas below.

- Block grid: ``ceil(rows / 128) x ceil(cols / 128)``; where a dim is not a multiple of 128 its
  last blocks are ragged (DeepSeek-V3's 576-row ``kv_a_proj_with_mqa``). Leading dims (experts)
  are independent weights.
- Scale (DeepSeek-V3 report, section 3.3; transformers' ``Fp8Quantize``): ``scale = 448 / amax``
  of the block in float32 (one correctly rounded division: computed in float64 and rounded to
  float32, which for a quotient of float32 values is the same), ``scale_inv = float32(1 /
  scale)``; a block of zeros keeps scale 1.
- UE8M0 (``scale_fmt="ue8m0"``, DeepSeek-V3.1's checkpoints, read by DeepGEMM; the E8M0 element
  of OCP MX v1.0): the inverse is the smallest power of two not below the float inverse, exactly
  (``2^ceil(log2(scale_inv))``: so ``amax * scale <= 448`` and the block never saturates), stored
  as E8M0; the forward scale is its exact reciprocal.
- Codes: ``E4M3(clamp(float32(x) * scale, -448, 448))``, rounded to nearest even by the codec.
- Dequantization: ``decode(code) * scale_inv`` in float32 (exact: a 4-bit significand times a
  24-bit one fits 28 bits, and the product is rounded once to float32), then the target dtype.

Torch and the standard library only: no native float8 cast, no transformers.
"""

from __future__ import annotations

import dataclasses

import torch

from .codec import decode, encode
from .formats import E4M3FN, E8M0FNU
from .validate import Choice, choice, tensor

__all__ = [
    "BLOCK",
    "ScaleFormat",
    "BlockFp8",
    "grid",
    "expand",
    "block_amax",
    "round_up_to_pow2",
    "block_scales",
    "quantize_blocks",
]

BLOCK = (128, 128)


class ScaleFormat(Choice):
    """How a block's inverse scale is stored."""

    FLOAT = "float"  # float32
    UE8M0 = "ue8m0"  # a power of two, as E8M0


def _block(block: object) -> tuple[int, int]:
    if (
        not isinstance(block, (tuple, list))
        or len(block) != 2
        or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
    ):
        raise ValueError(f"block: expected two positive ints (rows, cols), got {block!r}")
    return int(block[0]), int(block[1])


def grid(shape: torch.Size | tuple[int, ...], block: tuple[int, int] = BLOCK) -> tuple[int, int]:
    """The scale grid of a weight of ``shape`` (last two dims): ceil division by the block."""
    bm, bn = _block(block)
    if len(shape) < 2:
        raise ValueError(f"shape: a block-scaled weight has two dims at least, got {tuple(shape)}")
    return -(-shape[-2] // bm), -(-shape[-1] // bn)


def expand(
    per_block: torch.Tensor, shape: torch.Size | tuple[int, ...], block: tuple[int, int] = BLOCK
) -> torch.Tensor:
    """A per-block tensor (..., grid rows, grid cols) laid over a weight of ``shape``, ragged last
    blocks cut to the weight."""
    bm, bn = _block(block)
    rows, cols = shape[-2], shape[-1]
    return per_block.repeat_interleave(bm, dim=-2)[..., :rows, :].repeat_interleave(bn, dim=-1)[..., :cols]


def block_amax(w: torch.Tensor, block: tuple[int, int] = BLOCK) -> torch.Tensor:
    """The largest magnitude of each block (float32), ragged blocks included."""
    tensor(w, "w", floating=True)
    bm, bn = _block(block)
    gm, gn = grid(w.shape, block)
    a = w.float().abs()
    pad = (0, gn * bn - w.shape[-1], 0, gm * bm - w.shape[-2])  # zeros leave a block's amax as it is
    a = torch.nn.functional.pad(a, pad)
    a = a.reshape(*w.shape[:-2], gm, bm, gn, bn)
    return a.amax(dim=(-3, -1))


def _ceil_log2(x: torch.Tensor) -> torch.Tensor:
    """ceil(log2(x)) of positive finite float32 values, exactly (from the exponent and whether
    the significand is exactly one half)."""
    m, e = torch.frexp(x)
    return torch.where(m == 0.5, e - 1, e)


def round_up_to_pow2(x: torch.Tensor) -> torch.Tensor:
    """The smallest power of two not below each positive finite float32 value, exactly."""
    tensor(x, "x", floating=True)
    return torch.ldexp(torch.ones_like(x), _ceil_log2(x).to(x.dtype))


def block_scales(
    amax: torch.Tensor, scale_fmt: ScaleFormat | str = ScaleFormat.FLOAT
) -> tuple[torch.Tensor, torch.Tensor]:
    """(forward scale, stored inverse scale) per block, float32 values (module docstring)."""
    tensor(amax, "amax", floating=True)
    scale_fmt = choice(scale_fmt, ScaleFormat, "scale_fmt")
    a = amax.double()
    zero = a == 0
    scale = torch.where(zero, torch.ones_like(a), E4M3FN.max / torch.where(zero, torch.ones_like(a), a)).float()
    inv = (1.0 / scale.double()).float()
    if scale_fmt == ScaleFormat.UE8M0:
        inv = round_up_to_pow2(inv)
        scale = (1.0 / inv.double()).float()  # exact: the reciprocal of a power of two
    return scale, inv


@dataclasses.dataclass(frozen=True)
class BlockFp8:
    """A block-scaled FP8 weight: E4M3 ``codes`` (uint8, the weight's shape), ``scale_inv`` (the
    stored inverse scales as float32 values, the grid's shape), ``block``, ``scale_fmt``."""

    codes: torch.Tensor
    scale_inv: torch.Tensor
    block: tuple[int, int]
    scale_fmt: ScaleFormat

    def scale_inv_codes(self) -> torch.Tensor:
        """UE8M0 only: the inverse scales as E8M0 codes (uint8), as a checkpoint stores them."""
        if self.scale_fmt != ScaleFormat.UE8M0:
            raise ValueError(f"scale_inv_codes: only UE8M0 scales are E8M0 codes, these are {self.scale_fmt}")
        return encode(self.scale_inv, E8M0FNU)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``decode(code) * scale_inv`` in float32, then ``dtype``."""
        values = decode(self.codes, E4M3FN)
        return (values * expand(self.scale_inv, self.codes.shape, self.block)).to(dtype)


def quantize_blocks(
    w: torch.Tensor, block: tuple[int, int] = BLOCK, scale_fmt: ScaleFormat | str = ScaleFormat.FLOAT
) -> BlockFp8:
    """Quantize ``w`` (two dims or more) to a block-scaled E4M3 checkpoint weight."""
    tensor(w, "w", floating=True)
    blk = _block(block)
    fmt = choice(scale_fmt, ScaleFormat, "scale_fmt")
    scale, inv = block_scales(block_amax(w, blk), fmt)
    y = (w.float() * expand(scale, w.shape, blk)).clamp(-E4M3FN.max, E4M3FN.max)
    return BlockFp8(encode(y, E4M3FN, saturate=True), inv, blk, fmt)
