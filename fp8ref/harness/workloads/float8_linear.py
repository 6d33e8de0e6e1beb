"""torchao's Float8Linear training: a 2-layer MLP converted by ``convert_to_float8_training`` under
each of torchao's float8 recipes (tensorwise, rowwise, rowwise_with_gw_hp), two SGD steps."""

from __future__ import annotations

import functools

import torch

from ...reference.recipes import TORCHAO_RECIPES
from ..stack.probes import torchao_recipe_refusal
from . import tiny
from .base import Workload

__all__ = ["WORKLOADS", "train"]

STEPS = 2


def train(recipe: str) -> list[float]:
    """Two SGD steps of the MLP converted under ``recipe``; the losses."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    model = tiny.mlp()
    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, target = tiny.batch(step)
        loss = (model(x) - target).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def _gemms(recipe: str) -> int:
    """The float8 GEMMs one step runs: 2 layers x (output, grad input, and grad weight unless the
    recipe keeps it in high precision)."""
    return 2 * (2 if recipe.endswith("_gw_hp") else 3)


WORKLOADS = {
    f"float8_linear.{recipe}": Workload(
        name=f"float8_linear.{recipe}",
        what=f"torchao Float8Linear ({recipe}): a 2-layer MLP, two SGD steps",
        module=__name__,
        run=functools.partial(train, recipe),
        refusal=functools.partial(torchao_recipe_refusal, recipe),
        expects={
            ("aten._to_copy.default", "cast"): 2 * _gemms(recipe) * STEPS,
            ("aten._scaled_mm.default", "scaled_mm"): _gemms(recipe) * STEPS,
        },
    )
    for recipe in TORCHAO_RECIPES
}
