"""The transformers family's profile keys (``transformers.fp8.*``): its fine-grained FP8 against
the block reference, each path's answer, which weights the quantizer passes through, which the
loader refuses, and a tiny checkpoint through ``from_pretrained``. Device-independent: collected
for the CPU profile only. What each key means: ``meanings.py``."""

from __future__ import annotations

import functools

import torch

from ..stack import install
from ..stack.probing import Where, keys_or_refusal

__all__ = ["collect", "transformers_fp8_keys"]


def collect(where: Where) -> dict:
    return transformers_fp8_keys() if where.kind == "cpu" else {}


def transformers_fp8_keys() -> dict:
    """transformers' fine-grained FP8 against the block reference (``hf.block_checks``): each path's
    word (``definition``, ``deviates: <named deviations>``, ``differs``), which weights the
    quantizer passes through, which the loader refuses, and a tiny checkpoint through
    ``from_pretrained``. Device-independent: collected for the CPU profile only."""
    from . import block_checks
    from .transformers_fp8 import finegrained_refusal

    missing = finegrained_refusal()
    if missing is not None:
        return {"transformers.fp8": missing.split(":", 1)[0] if missing.startswith("missing") else missing}
    out = {"transformers.fp8.quantize.passes": "; ".join(f"{k}: {v}" for k, v in block_checks.passes_through().items())}
    for fmt in ("float", "ue8m0"):
        out[f"transformers.fp8.quantize.{fmt}"] = block_checks.profile_value(block_checks.check_quantize(fmt))
        for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            loader = block_checks.check_loader(dtype, fmt)
            out[f"transformers.fp8.loader.{fmt}.{tag}"] = block_checks.profile_value(loader)
            out[f"transformers.fp8.backward.{fmt}.{tag}"] = block_checks.profile_value(
                block_checks.check_backward(dtype, fmt)
            )
        out[f"transformers.fp8.loader.{fmt}.576x256"] = loader.observed.get("576x256", "")
    if install.has_package("accelerate"):
        # (building the model imports transformers' quantizers, which import an installed torchao:
        # a torchao that does not import is the install's answer for these keys, not a crash)
        keys = [f"transformers.fp8.from_pretrained.{fmt}" for fmt in ("float", "ue8m0")]
        out.update(keys_or_refusal(keys, functools.partial(_from_pretrained, keys)))
    else:
        out["transformers.fp8.from_pretrained"] = "missing: accelerate"
    return out


def _from_pretrained(keys: list[str]) -> dict:
    """A tiny Qwen3 FP8 block checkpoint written by fp8ref in each scale format and loaded by
    ``from_pretrained``: each load's profile value (``block_checks.profile_value``)."""
    import tempfile

    from . import block_checkpoint, block_checks

    config, state = block_checkpoint.tiny_qwen3()  # (one model, written in each scale format)
    out = {}
    for key in keys:
        with tempfile.TemporaryDirectory() as folder:
            quantized = block_checkpoint.write(folder, config, state, key.rsplit(".", 1)[1])
            loaded = block_checkpoint.load(folder).state_dict()
        out[key] = block_checks.profile_value(block_checkpoint.check_load(loaded, quantized))
    return out
