"""MX training with torchao: ``quantize_`` with ``MXFP8TrainingOpConfig`` (the
``mxfp8_emulated_rceil`` recipe: E4M3 elements in blocks of 32 with E8M0 scales, RCEIL, the GEMMs
emulated as matmuls of the dequantized blocks, so it runs on the CPU) swaps the MLP's weights
for torchao's MXFP8 training tensors; two SGD steps."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..stack.probes import torchao_float8_refusal
from ..stack.refusals import attempt, import_refusal
from . import tiny
from .base import Workload

__all__ = ["WORKLOAD", "run"]

STEPS = 2
_CONFIG = "torchao.prototype.moe_training.config"


def _convert(model: torch.nn.Module) -> None:
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
    from torchao.quantization import quantize_

    config = MXFP8TrainingOpConfig.from_recipe(MXFP8TrainingRecipe.MXFP8_EMULATED_RCEIL)
    quantize_(model, config, filter_fn=lambda module, _: isinstance(module, torch.nn.Linear))


def run() -> list[float]:
    """Two SGD steps of the MLP (64 -> 32 -> 32: every GEMM's contraction a whole block); the losses."""
    model = tiny.mlp((64, 32, 32))
    _convert(model)
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


@functools.cache
def refusal(device: str = "cpu") -> str | None:
    """The install's words when torchao does not convert one bfloat16 Linear(32, 32) for MXFP8
    training and run it forward and backward on 32 tokens."""
    missing = torchao_float8_refusal() or import_refusal(_CONFIG, ("MXFP8TrainingOpConfig", "MXFP8TrainingRecipe"))
    if missing is not None:
        return missing

    def smallest() -> Any:
        lin = torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False, dtype=torch.bfloat16, device=device))
        _convert(lin)
        x = torch.ones(32, 32, dtype=torch.bfloat16, device=device, requires_grad=True)
        # (the workload's own loss: a contiguous gradient reaches the layer; .sum() would hand it an
        # expanded one, which torchao 0.17's to_mx asserts against, a path the workload never takes)
        lin(x).float().pow(2).mean().backward()
        return x.grad

    ok, result = attempt(smallest, device)
    return None if ok else str(result)


# per step and layer: the forward's 2 operands, the backward's 4, each cast to E4M3 blocks with
# its E8M0 scales (their reciprocals made by exp2 from the exponent bytes) and decoded for the
# emulated GEMM (each scale made by pow from the bytes); the layer's 3 GEMMs, of decoded blocks
WORKLOAD = Workload(
    name="mx_training",
    what="torchao MXFP8 training (emulated, RCEIL) of a 2-layer MLP, two SGD steps",
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        ("aten._to_copy.default", "cast"): 12 * STEPS,
        ("aten.to.dtype", "values"): 12 * STEPS,
        ("aten.exp2.default", "e8m0_scale"): 12 * STEPS,
        ("aten.pow.Tensor_Tensor", "e8m0_scale"): 12 * STEPS,
        ("aten.mm.default", "dequantized_gemm"): 6 * STEPS,
    },
)
