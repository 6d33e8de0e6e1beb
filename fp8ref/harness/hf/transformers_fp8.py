"""transformers' fine-grained FP8 (``transformers.integrations.finegrained_fp8``) in fp8ref's terms:
the quantizer a checkpoint is saved with, the dequantizer ``from_pretrained(...,
FineGrainedFP8Config(dequantize=True))`` loads with, and the backward a LoRA step on a frozen FP8
layer takes (``FP8LinearFunction``). Codes come back as uint8, scales as float32 values (an
E8M0 inverse read as its power of two). Written against transformers 5.x; imported lazily,
``require_transformers`` names the package when it is missing.

The forward ``FP8Linear`` and ``FP8Experts`` run Triton or DeepGEMM kernels: GPU only.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from ..stack.install import require

__all__ = [
    "require_transformers",
    "finegrained_refusal",
    "quantize",
    "loader_dequantize",
    "backward_dequantize",
    "lora_input_grad",
]


def require_transformers(what: str = "this") -> Any:
    """transformers' fine-grained FP8 module; ``MissingPackage`` without transformers (an
    ImportError from the module itself, a transformers without it, propagates)."""
    require("transformers", what)
    from transformers.integrations import finegrained_fp8

    return finegrained_fp8


def finegrained_refusal() -> str | None:
    """None when transformers' fine-grained FP8 imports here, else why not."""
    try:
        require_transformers("transformers' fine-grained FP8")
    except Exception as exc:  # noqa: BLE001 - missing, or a transformers without the module
        return f"missing: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
    return None


def _quantizer(block: tuple[int, int], scale_fmt: str) -> Any:
    """What transformers' conversion ops read of their quantizer: its quantization config."""
    from transformers import FineGrainedFP8Config

    return types.SimpleNamespace(quantization_config=FineGrainedFP8Config(weight_block_size=block, scale_fmt=scale_fmt))


def _as_values(scale_inv: torch.Tensor) -> torch.Tensor:
    return scale_inv.float()  # (an E8M0 code reads as its power of two)


def quantize(
    w: torch.Tensor, block: tuple[int, int] = (128, 128), scale_fmt: str = "float"
) -> tuple[torch.Tensor, torch.Tensor, torch.dtype] | None:
    """``Fp8Quantize`` of one weight: (E4M3 codes as uint8, inverse scales as float32 values, the
    stored scale dtype); None when it passes the weight through unquantized."""
    fp8 = require_transformers("transformers' Fp8Quantize")
    out = fp8.Fp8Quantize(_quantizer(block, scale_fmt))._quantize_one("layer.weight", w)
    if "layer.weight_scale_inv" not in out:
        return None
    codes, inv = out["layer.weight"], out["layer.weight_scale_inv"]
    return codes.view(torch.uint8), _as_values(inv), inv.dtype


def _stored(
    codes: torch.Tensor, scale_inv: torch.Tensor, scale_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    return codes.view(torch.float8_e4m3fn), scale_inv.to(scale_dtype)


def loader_dequantize(
    codes: torch.Tensor,
    scale_inv: torch.Tensor,
    dtype: torch.dtype,
    scale_dtype: torch.dtype = torch.float32,
    block: tuple[int, int] = (128, 128),
) -> torch.Tensor:
    """``Fp8Dequantize`` of one stored weight (codes uint8, inverse scales as values, stored in
    ``scale_dtype``) into ``dtype``, as ``from_pretrained(..., dequantize=True)`` loads it."""
    fp8 = require_transformers("transformers' Fp8Dequantize")
    q, s = _stored(codes, scale_inv, scale_dtype)
    return fp8.Fp8Dequantize(_quantizer(block, "float"))._dequantize_one(q, s, output_dtype=dtype)


def backward_dequantize(
    codes: torch.Tensor,
    scale_inv: torch.Tensor,
    dtype: torch.dtype,
    scale_dtype: torch.dtype = torch.float32,
    block: tuple[int, int] = (128, 128),
) -> torch.Tensor:
    """``_dequantize_fp8_weight``: the weight ``FP8LinearFunction.backward`` multiplies the output
    gradient by, in the gradient's ``dtype``."""
    fp8 = require_transformers("transformers' FP8 backward")
    q, s = _stored(codes, scale_inv, scale_dtype)
    return fp8._dequantize_fp8_weight(q, s, list(block), dtype)


def lora_input_grad(
    codes: torch.Tensor,
    scale_inv: torch.Tensor,
    grad_output: torch.Tensor,
    scale_dtype: torch.dtype = torch.float32,
    block: tuple[int, int] = (128, 128),
) -> torch.Tensor:
    """The input gradient ``FP8LinearFunction.backward`` gives a frozen FP8 layer (what a LoRA step
    on it propagates), called as autograd calls it: with the context its forward saved."""
    fp8 = require_transformers("transformers' FP8 backward")
    q, s = _stored(codes, scale_inv, scale_dtype)
    ctx = types.SimpleNamespace(saved_tensors=(q, s), block_size=list(block))
    return fp8.FP8LinearFunction.backward(ctx, grad_output)[0]
