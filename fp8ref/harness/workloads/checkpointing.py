"""Activation checkpointing around torchao's Float8Linear (tensorwise) MLP:
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` drops the forward's activations
and runs the forward again, float8 casts and GEMMs included, inside the backward. Two SGD steps."""

from __future__ import annotations

import functools

import torch
from torch.utils.checkpoint import checkpoint

from ..stack.probes import torchao_recipe_refusal
from . import tiny
from .base import Workload

__all__ = ["WORKLOAD", "run"]

STEPS = 2


def run() -> list[float]:
    """Two SGD steps, the MLP's forward checkpointed; the losses."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    model = tiny.mlp()
    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name("tensorwise"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, target = tiny.batch(step)
        x.requires_grad_()
        y = checkpoint(model, x, use_reentrant=False)
        loss = (y - target).float().pow(2).mean()
        loss.backward()  # (the forward runs again here)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


# per step: the forward's 2 GEMMs twice (run, then run again in the backward) and the backward's 4
WORKLOAD = Workload(
    name="checkpointing",
    what="torchao Float8Linear (tensorwise) under non-reentrant activation checkpointing, two SGD steps",
    module=__name__,
    run=run,
    refusal=functools.partial(torchao_recipe_refusal, "tensorwise"),
    expects={
        ("aten._to_copy.default", "cast"): 16 * STEPS,
        ("aten._scaled_mm.default", "scaled_mm"): 8 * STEPS,
    },
)
