"""transformers' fine-grained FP8 (``transformers.integrations.finegrained_fp8``) in fp8ref's terms:
the quantizer a checkpoint is saved with, the dequantizer ``from_pretrained(...,
FineGrainedFP8Config(dequantize=True))`` loads with, and the backward a LoRA step on a frozen FP8
layer takes (``FP8LinearFunction``). Codes come back as uint8, scales as float32 values (an
E8M0 inverse read as its power of two). Written against transformers 5.x; imported lazily,
``require_transformers`` names the package when it is missing.

The forward ``FP8Linear`` and ``FP8Experts`` run Triton or DeepGEMM kernels: GPU only.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from ..stack.install import MissingPackage, has_package, needs_package, require
from ..stack.refusals import attempt, import_refusal

__all__ = [
    "require_transformers",
    "finegrained_refusal",
    "fp8_layer_refusal",
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
    """None when transformers' fine-grained FP8 imports here, else why not: ``missing: ...``
    without transformers, the install's refusal (``refused: ImportError: ...``) when it lacks the
    module or fails to import it."""
    if not has_package("transformers"):
        words = needs_package("transformers", "transformers' fine-grained FP8")
        return f"missing: {MissingPackage.__name__}: {words[:160]}"
    # (a transformers that fails to import is the install's answer too, or fp8ref's own need missing)
    return import_refusal("transformers.integrations.finegrained_fp8")


@functools.cache
def fp8_layer_refusal(layer: str, device: str) -> str | None:
    """None when transformers' ``FP8Linear`` (``layer="linear"``) or ``FP8Experts``
    (``"experts"``) runs a forward on ``device`` (the smallest call that asks: one 128 x 128
    block, two tokens), else the install's refusal (their Triton or DeepGEMM kernels: GPU only).
    Asked once per process; a check then runs the layer unguarded."""
    refused = finegrained_refusal()
    if refused is not None:
        return refused
    fp8 = require_transformers(f"transformers' FP8 {layer}")
    x = torch.randn(2, 128, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).to(device)

    def forward() -> torch.Tensor:
        if layer == "linear":
            return fp8.FP8Linear(128, 128, block_size=(128, 128)).to(device)(x)
        config = types.SimpleNamespace(hidden_size=128, moe_intermediate_size=128, num_experts=2, hidden_act="silu")
        experts = fp8.FP8Experts(config, block_size=(128, 128)).to(device)
        index = torch.zeros(2, 1, dtype=torch.long, device=device)
        return experts(x, index, torch.ones(2, 1, dtype=torch.bfloat16, device=device))

    ok, answer = attempt(forward, device)
    return None if ok else str(answer)


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
