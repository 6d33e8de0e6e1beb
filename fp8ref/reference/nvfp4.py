"""NVFP4: E2M1 elements in blocks of 16, a UE4M3 scale per block, optionally an FP32 scale per tensor.

Written from NVIDIA's description of the format (Blackwell block-scaled NVFP4; "Pretraining Large
Language Models with NVFP4", NVIDIA 2025) with the float32 arithmetic order of torchao's
``prototype.mx_formats.nvfp4_tensor.nvfp4_quantize`` (v0.18), so the result is comparable
bitwise. Nothing here calls torchao or a native float8 cast: the scale and element codes come
from ``fp8ref.reference.codec``.

Scales here are *decode* scales (multiplied on dequantize), the convention of the format.

Single level (no per-tensor scale), per block b of 16 along the last dim:
    s_b   = UE4M3(clamp(amax_b / 6, min_scale, 448))        the stored block scale
    q     = E2M1(clamp(x * (1 / s_b), -6, 6))               saturating, RNE (or SR)
    x    ~= value(q) * s_b
The product with the float32 reciprocal is torchao 0.18's order; torchao 0.17 divides, ``x / s_b``
in float32 (``division="divide"``). The two differ where ``1 / s_b`` is inexact and ``x / s_b`` is
an E2M1 tie: 18.75 / 3.75 = 5 exactly rounds to 4, 18.75 * float32(1 / 3.75) is above 5 and
rounds to 6.

Two level, with a per-tensor scale ``g`` (float32):
    s_b   = UE4M3(clamp((amax_b / 6) / g, min_scale, 448))
    q     = E2M1(clamp(x * ((1 / g) / s_b), -6, 6))
    x    ~= value(q) * (g * s_b)

The per-tensor scale is derived from the requirement that the block holding the tensor's amax
gets the largest block scale E4M3 has: ``(amax / 6) / g = 448``, so ``g = amax / (6 * 448)``
(``per_tensor_scale``). ``min_scale`` is E4M3's smallest normal, 2^-6, by default (torchao clamps
there so an all-zero block does not divide by zero; the format itself does not say).

A block whose amax is NaN gets the NaN scale (0x7F); its element codes are 0 (E2M1 has no NaN:
the scale carries it), so it dequantizes to NaN.
"""

from __future__ import annotations

import dataclasses

import torch

from .codec import Rounding, decode, encode, pack_fp4
from .formats import E2M1FN, UE4M3
from .validate import Choice, choice, instance, positive_finite, positive_number, tensor

__all__ = [
    "BLOCK",
    "MIN_SCALE",
    "Division",
    "Level",
    "Nvfp4Data",
    "per_tensor_scale",
    "quantize",
    "quantize_current",
    "dequantize",
]

BLOCK = 16
MIN_SCALE = 2.0**-6  # E4M3's smallest normal (torch.finfo(float8_e4m3fn).tiny)


def per_tensor_scale(amax: torch.Tensor) -> torch.Tensor:
    """The two-level per-tensor (decode) scale ``amax / (E2M1 max * E4M3 max)`` in float32."""
    tensor(amax, "amax", floating=True)
    return amax.to(torch.float32) / (E2M1FN.max * UE4M3.max)


@dataclasses.dataclass(frozen=True)
class Nvfp4Data:
    """NVFP4 codes and scales.

    codes: uint8 E2M1 codes, one per byte, the input's shape. block_scale: uint8 UE4M3 codes
    (the byte a float8_e4m3fn scale holds), shape (..., K / 16). tensor_scale: float32 0-d
    tensor, or None for single-level scaling. orig_dtype: the input's dtype.
    """

    codes: torch.Tensor
    block_scale: torch.Tensor
    tensor_scale: torch.Tensor | None
    orig_dtype: torch.dtype

    def packed(self) -> torch.Tensor:
        """Two codes per byte (``codec.pack_fp4``), as torch's float4_e2m1fn_x2 holds them."""
        return pack_fp4(self.codes)

    def scales(self) -> torch.Tensor:
        """The decode scale of each block in float32: ``g * s_b`` (two level) or ``s_b``."""
        s = decode(self.block_scale, UE4M3)
        return s if self.tensor_scale is None else self.tensor_scale * s

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        return dequantize(self, dtype)


def _blocks(x: torch.Tensor) -> torch.Tensor:
    if x.dim() < 1 or x.shape[-1] % BLOCK:
        raise ValueError(f"x: NVFP4 needs the last dim to be a multiple of {BLOCK}, got shape {tuple(x.shape)}")
    return x.float().reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)


class Division(Choice):
    """How the elements of a single-level block are divided by its scale (module docstring)."""

    RECIPROCAL = "reciprocal"  # x * float32(1 / s_b): torchao 0.18
    DIVIDE = "divide"  # float32(x / s_b): torchao 0.17


def quantize(
    x: torch.Tensor,
    tensor_scale: torch.Tensor | float | None = None,
    *,
    min_scale: float = MIN_SCALE,
    rounding: Rounding | str = Rounding.RNE,
    generator: torch.Generator | None = None,
    division: Division | str = Division.RECIPROCAL,
) -> Nvfp4Data:
    """Quantize ``x`` (float32/bfloat16/float16, last dim a multiple of 16) to NVFP4.

    ``tensor_scale``: None for single-level scaling, else the per-tensor decode scale (a 0-d
    tensor or a number; ``per_tensor_scale(amax)`` gives the format's choice). ``rounding``:
    ``rne`` or ``sr`` for the elements (NVFP4 training recipes round gradients stochastically).
    ``division``: ``reciprocal`` or ``divide``, single level only (module docstring).
    """
    tensor(x, "x", dtypes=(torch.float32, torch.bfloat16, torch.float16))
    division = choice(division, Division, "division")
    if division == Division.DIVIDE and tensor_scale is not None:
        raise ValueError("division: 'divide' is the single-level arithmetic; pass tensor_scale=None")
    positive_number(min_scale, "min_scale")
    rounding = choice(rounding, Rounding, "rounding")
    if tensor_scale is not None:
        positive_finite(tensor_scale, "tensor_scale")
    if isinstance(tensor_scale, (int, float)) and not isinstance(tensor_scale, bool):
        tensor_scale = torch.tensor(float(tensor_scale), dtype=torch.float32, device=x.device)
    if tensor_scale is not None:
        instance(tensor_scale, torch.Tensor, "tensor_scale", "None, a number or a 0-d tensor")
        assert isinstance(tensor_scale, torch.Tensor)  # (for the type checker: instance() said so)
        if tensor_scale.numel() != 1:
            raise ValueError(f"tensor_scale: expected one value, got shape {tuple(tensor_scale.shape)}")
        tensor_scale = tensor_scale.to(device=x.device, dtype=torch.float32).reshape(())
    xb = _blocks(x)
    block_decode = xb.abs().amax(dim=-1) / E2M1FN.max
    if tensor_scale is not None:
        block_decode = block_decode / tensor_scale
    s_codes = encode(block_decode.clamp(min_scale, UE4M3.max), UE4M3)
    s = decode(s_codes, UE4M3)
    if division == Division.DIVIDE:
        y = (xb / s.unsqueeze(-1)).clamp(-E2M1FN.max, E2M1FN.max)
    else:
        recip = 1.0 / s if tensor_scale is None else (1.0 / tensor_scale) / s
        y = (xb * recip.unsqueeze(-1)).clamp(-E2M1FN.max, E2M1FN.max)
    y = y.masked_fill(torch.isnan(s).unsqueeze(-1).expand_as(y), 0.0)  # the NaN is in the scale
    codes = encode(y.reshape(x.shape), E2M1FN, saturate=True, rounding=rounding, generator=generator)
    return Nvfp4Data(codes, s_codes, tensor_scale, x.dtype)


def dequantize(q: Nvfp4Data, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``value(code) * scale`` per block in float32 (torchao's NVFP4Tensor.dequantize order),
    then ``dtype`` (default: the original dtype)."""
    instance(q, Nvfp4Data, "q", "an Nvfp4Data")
    v = _blocks(decode(q.codes, E2M1FN))
    return (v * q.scales().unsqueeze(-1)).reshape(q.codes.shape).to(dtype or q.orig_dtype)


class Level(Choice):
    """Single-level (block scales only) or two-level (plus a per-tensor scale) NVFP4."""

    SINGLE = "single"
    TWO = "two"


def quantize_current(
    x: torch.Tensor,
    level: Level | str = Level.TWO,
    *,
    rounding: Rounding | str = Rounding.RNE,
    generator: torch.Generator | None = None,
    division: Division | str = Division.RECIPROCAL,
) -> Nvfp4Data:
    """Current scaling: two level takes the per-tensor scale from ``x``'s own amax."""
    level = choice(level, Level, "level")
    tensor(x, "x", floating=True)
    g = per_tensor_scale(x.float().abs().amax()) if level == Level.TWO else None
    return quantize(x, g, rounding=rounding, generator=generator, division=division)
