"""FP8 block checkpoints on disk, as DeepSeek-V3 and Qwen3-FP8 ship them: written by fp8ref's
reference quantizer (``reference.block_fp8``), read by transformers' ``from_pretrained`` with
``FineGrainedFP8Config(dequantize=True)``, the loaded weights held to the reference's
dequantization (``check_load``).

A checkpoint is a folder with ``config.json`` (the model's config plus a ``quantization_config``:
``quant_method: fp8``, ``weight_block_size: [128, 128]``, ``scale_fmt``) and ``model.safetensors``:
every 2-D ``*proj.weight`` as float8_e4m3fn codes with its ``weight_scale_inv`` (float32, or E8M0
for UE8M0), everything else (embeddings, norms, the LM head) as it is.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import torch

from ...reference.block_fp8 import BLOCK, BlockFp8, ScaleFormat, quantize_blocks
from ..stack.install import require
from .block_checks import BlockCheck, judge_loaded

__all__ = [
    "QUANTIZED",
    "is_quantized",
    "write",
    "read",
    "fp8_config",
    "tiny_qwen3",
    "quantization_config",
    "load",
    "check_load",
    "check_loader_on",
]

QUANTIZED = "proj.weight"  # (the linear layers a fine-grained FP8 checkpoint quantizes)


def is_quantized(name: str, t: torch.Tensor) -> bool:
    return t.ndim == 2 and name.endswith(QUANTIZED)


def write(
    folder: str | Path, config: dict[str, Any], state: dict[str, torch.Tensor], scale_fmt: str = "float"
) -> dict[str, BlockFp8]:
    """Write ``state`` as an FP8 block checkpoint into ``folder`` (created), the projections
    quantized by the reference, a tensor tied to an earlier one left out; returns the quantized
    weights by name."""
    require("safetensors", "writing an FP8 block checkpoint")
    from safetensors.torch import save_file

    fmt = ScaleFormat(scale_fmt)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    quantized: dict[str, BlockFp8] = {}
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for name, t in state.items():
        key = (t.data_ptr(), tuple(t.shape))
        if key in seen:  # a tied weight (the LM head of tied embeddings): kept once, as transformers saves it
            continue
        seen.add(key)
        if not is_quantized(name, t):
            tensors[name] = t.detach().contiguous()
            continue
        q = quantize_blocks(t.detach(), BLOCK, fmt)
        quantized[name] = q
        tensors[name] = q.codes.view(torch.float8_e4m3fn)
        scale = q.scale_inv_codes().view(torch.float8_e8m0fnu) if fmt == ScaleFormat.UE8M0 else q.scale_inv
        tensors[name.removesuffix("weight") + "weight_scale_inv"] = scale.contiguous()
    config = {**config, "quantization_config": quantization_config(fmt)}
    (folder / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True, default=str) + "\n")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return quantized


def fp8_config(folder: str | Path) -> dict[str, Any] | None:
    """The fine-grained FP8 ``quantization_config`` of the checkpoint in ``folder`` (its
    config.json), or None when it is not an FP8 block checkpoint (or has no readable config)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    q = config.get("quantization_config") if isinstance(config, dict) else None
    return q if isinstance(q, dict) and q.get("quant_method") == "fp8" and q.get("weight_block_size") else None


def read(folder: str | Path) -> dict[str, BlockFp8]:
    """The FP8 weights of the checkpoint in ``folder`` (every ``*.safetensors`` file): each weight
    with a ``weight_scale_inv`` beside it, as the reference holds it (codes, inverse scales as
    float32 values, the block of its ``quantization_config``, float or UE8M0 by the scales' dtype)."""
    require("safetensors", "reading an FP8 block checkpoint")
    from safetensors import safe_open

    q = fp8_config(folder)
    if q is None:
        raise ValueError(f"folder: {folder} holds no fine-grained FP8 checkpoint (no fp8 quantization_config)")
    bm, bn = (int(b) for b in q["weight_block_size"])
    out: dict[str, BlockFp8] = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            names = set(f.keys())
            for scale_name in sorted(n for n in names if n.endswith("weight_scale_inv")):
                name = scale_name.removesuffix("_scale_inv")
                if name not in names:
                    continue
                scale = f.get_tensor(scale_name)
                fmt = ScaleFormat.UE8M0 if scale.dtype == torch.float8_e8m0fnu else ScaleFormat.FLOAT
                codes = f.get_tensor(name).view(torch.uint8)
                out[name] = BlockFp8(codes, scale.float(), (bm, bn), fmt)
    return out


def quantization_config(scale_fmt: ScaleFormat | str = ScaleFormat.FLOAT) -> dict[str, Any]:
    """The ``quantization_config`` of a fine-grained FP8 checkpoint."""
    return {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "weight_block_size": list(BLOCK),
        "scale_fmt": str(ScaleFormat(scale_fmt)),
    }


def tiny_qwen3(intermediate: int = 448, seed: int = 0) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A one-layer Qwen3 causal LM (hidden 256, two heads of 128, one KV head), bfloat16, as
    (config dict, state dict): its MLP projections 448 wide by default, so their last 128 x 128
    blocks are ragged (the grid divides the shape, as in ``block_checks``)."""
    require("transformers", "a tiny Qwen3 model")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=intermediate,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=128,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    # (transformers' stubs type .to() as a wrapper taking the model; it takes a dtype like nn.Module's)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)  # type: ignore[arg-type]
    config = cfg.to_dict()
    config["torch_dtype"] = "bfloat16"
    return config, model.state_dict()


def load(folder: str | Path, dtype: torch.dtype = torch.bfloat16) -> Any:
    """``AutoModelForCausalLM.from_pretrained(folder, quantization_config=FineGrainedFP8Config(
    dequantize=True))`` in ``dtype``, on the CPU."""
    require("transformers", "loading an FP8 block checkpoint")
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # (a check prints nothing: the profile's stderr stays empty)
    try:
        return AutoModelForCausalLM.from_pretrained(
            str(folder), quantization_config=FineGrainedFP8Config(dequantize=True), dtype=dtype
        )
    finally:
        if bar:
            hf_logging.enable_progress_bar()


def check_load(
    loaded: dict[str, torch.Tensor], quantized: dict[str, BlockFp8], dtype: torch.dtype = torch.bfloat16
) -> BlockCheck:
    """Each quantized weight as loaded (``loaded``: the model's state dict) against the
    reference's dequantization into ``dtype`` (``block_checks.judge_loaded``)."""
    check = BlockCheck()
    for name, q in quantized.items():
        got = loaded.get(name)
        if got is None:
            check.problems.append(f"{name}: not in the loaded model")
            continue
        judge_loaded(check, name, got, q, dtype)
    return check


def check_loader_on(quantized: dict[str, BlockFp8], dtype: torch.dtype = torch.bfloat16) -> BlockCheck:
    """``check_load`` of what transformers' loader (``Fp8Dequantize``, the function
    ``from_pretrained(..., dequantize=True)`` runs on each weight) makes of ``quantized``: the same
    answers as a whole load, without building the model. A weight it raises the loader
    deviation's error for is a problem (the checkpoint does not load); any other error propagates."""
    from .block_checks import loaded_or_deviating_error, stored_dtype
    from .transformers_fp8 import loader_dequantize

    loaded: dict[str, torch.Tensor] = {}
    refused = BlockCheck()
    for name, q in quantized.items():
        load = functools.partial(loader_dequantize, q.codes, q.scale_inv, dtype, stored_dtype(q.scale_fmt), q.block)
        got = loaded_or_deviating_error(load, q.codes, q.scale_inv)
        if isinstance(got, torch.Tensor):
            loaded[name] = got
        else:
            refused.problems.append(f"{name}: transformers' loader refuses it: {got}")
    check = check_load(loaded, {n: q for n, q in quantized.items() if n in loaded}, dtype)
    check.problems += refused.problems
    return check
