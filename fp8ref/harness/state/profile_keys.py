"""The state family's profile keys: which ways of keeping FP8 state give a float8 tensor, and each
of torchao's quantized subclasses, back whole (``checkpoint.*``); torchao's FP8 optimizer state
(``torchao.optim.*``); and what torchao's Float8Linear does under autocast (``torchao.autocast.*``).
What each key means: ``meanings.py``."""

from __future__ import annotations

from typing import Any

import torch

from ...reference.formats import select
from ...reference.recipes import TORCHAO_RECIPES
from ..stack import probes
from ..stack.install import device_kind
from ..stack.probing import Where, keys_or_refusal
from ..stack.refusals import attempt

__all__ = ["collect", "checkpoint_keys", "optimizer_state_keys", "autocast_keys"]


def collect(where: Where) -> dict:
    out = checkpoint_keys(where.device, where.torchao)
    if where.torchao:
        out |= autocast_keys(where.device) | optimizer_state_keys(where.device)
    return out


def checkpoint_keys(device: str, torchao: bool) -> dict:
    """Which ways of keeping FP8 state (``keeping.KEEP``) give a float8 tensor of each dtype, and
    each of torchao's quantized subclasses, back whole: ``ok``, ``lost: <field>`` or the refusal."""
    from .keeping import KEEP, PLAIN_ONLY, check_kept, subclass_examples, ways_for

    def words(t: torch.Tensor, name: str) -> dict:
        r = check_kept(t)
        return {
            f"checkpoint.{name}.{way}": r.refused.get(way)
            or r.failed.get(way)
            or r.known.get(way)
            or (f"lost: {r.lost[way][0]}" if way in r.lost else "ok")
            for way in ways_for(t)
        }

    out: dict = {}
    for fmt in select(has_torch_dtype=True):
        if probes.torch_dtype_refusal(fmt) is None:
            codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(device)
            out.update(words(codes.view(fmt.torch_dtype()), fmt.name))
    if torchao and probes.torchao_float8_refusal() is None:
        ok, examples = attempt(lambda: subclass_examples(device))
        if not ok or isinstance(examples, str):
            return out | {"checkpoint.torchao": examples}
        for name, make in examples.items():
            keys = [f"checkpoint.torchao.{name}.{w}" for w in KEEP if w not in PLAIN_ONLY]
            out.update(
                keys_or_refusal(keys, lambda make=make, name=name: words(make(), f"torchao.{name}"), device=device)
            )
    return out


def optimizer_state_keys(device: str) -> dict:
    """torchao's FP8 optimizer state (``OptimStateFp8``, the state of ``AdamWFp8``): its default
    block size, its scale dtype, and whether it holds fp8ref's codes and scales
    (``fp8_optimizer.check_state_quantization``, the check the tests hold it to)."""
    from .fp8_optimizer import check_state_quantization

    if probes.torchao_float8_refusal() is not None:
        return {}  # (the torchao key says why)
    key = "torchao.optim.fp8_state"

    def probe():
        from torchao.optim import AdamWFp8
        from torchao.optim.subclass_fp8 import OptimStateFp8

        block = AdamWFp8([torch.nn.Parameter(torch.zeros(1))]).block_size

        def keep(x: torch.Tensor) -> Any:
            state = OptimStateFp8.zeros(x.shape, block, device)
            state.copy_(x.to(device))
            return state

        same = check_state_quantization(keep) is None
        return {
            key: f"block {block}, scale {str(keep(torch.ones(block)).scale.dtype).removeprefix('torch.')}, "
            + ("codes and scales as the reference" if same else "differs from the reference")
        }

    return keys_or_refusal([key], probe, device=device)


def autocast_keys(device: str) -> dict:
    """Which dtype torchao's Float8Linear quantizes its input from under autocast, and which it
    returns (``autocast.autocast_answer``), per autocast dtype and recipe."""
    from ..ao.torchao_compat import torchao_float8_linear
    from .autocast import autocast_answer

    if probes.torchao_float8_refusal() is not None:
        return {}
    out: dict = {}
    for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        for recipe in TORCHAO_RECIPES:
            key = f"torchao.autocast.{device_kind(device).split('-')[0]}.{tag}.{recipe}"

            def probe(recipe=recipe, dtype=dtype, key=key):
                return {key: autocast_answer(torchao_float8_linear(recipe), recipe, dtype, device)}

            out.update(keys_or_refusal([key], probe, device=device))
    return out
