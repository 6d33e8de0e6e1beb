"""Gradient accumulation: three micro-batches of backward through torchao's Float8Linear
(tensorwise) before one SGD step, the weight's gradient summed across them in high precision."""

from __future__ import annotations

import functools

import torch

from ..stack.probes import torchao_recipe_refusal
from . import tiny
from .base import Workload

__all__ = ["WORKLOAD", "run"]

MICRO_BATCHES = 3


def run() -> float:
    """One SGD step after three micro-batches; the summed loss."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    model = tiny.mlp()
    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name("tensorwise"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    for micro in range(MICRO_BATCHES):
        x, target = tiny.batch(micro, rows=16)
        loss = (model(x) - target).float().pow(2).mean() / MICRO_BATCHES
        loss.backward()
        total += loss.item()
    opt.step()
    opt.zero_grad()
    return total


WORKLOAD = Workload(
    name="grad_accumulation",
    what="torchao Float8Linear (tensorwise): three micro-batches of backward, then one SGD step",
    module=__name__,
    run=run,
    refusal=functools.partial(torchao_recipe_refusal, "tensorwise"),
    expects={
        ("aten._to_copy.default", "cast"): 12 * MICRO_BATCHES,
        ("aten._scaled_mm.default", "scaled_mm"): 6 * MICRO_BATCHES,
    },
)
