"""torchao's float8 quantization-aware training: ``quantize_`` with ``QATConfig(step="prepare")``
around ``Float8DynamicActivationFloat8WeightConfig`` (per-row scales) puts float8 fake quantizers
on a 2-layer MLP's activations and weights (a cast into E4M3 and back at every forward); two SGD
steps; then ``QATConfig(step="convert")``, which builds torchao's float8 inference tensors where
the install allows (on the CPU torchao refuses them: recorded in the result, the rest still runs)
and one forward after it."""

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


def _config() -> Any:
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow

    return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())


def run() -> dict[str, Any]:
    """Prepare, two steps, convert where allowed: the losses, and the convert step's outcome
    (``converted``, or the install's refusal) with the output after it."""
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig

    model = tiny.mlp()
    quantize_(model, QATConfig(_config(), step="prepare"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, target = tiny.batch(step)
        loss = (model(x) - target).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    ok, words = attempt(lambda: quantize_(model, QATConfig(_config(), step="convert")))
    with torch.no_grad():
        after = model(tiny.batch(STEPS)[0]) if ok else None
    return {"losses": losses, "convert": "converted" if ok else words, "after": after}


@functools.cache  # (a fact of the install: asked by the profile and by the test, answered once)
def refusal(device: str = "cpu") -> str | None:
    """The install's words when torchao's float8 QAT (``QATConfig``, ``Float8FakeQuantizeConfig``)
    does not import, or its prepare step refuses one small layer."""
    words = torchao_float8_refusal() or import_refusal(
        "torchao.quantization.qat", ("QATConfig", "Float8FakeQuantizeConfig")
    )
    if words is not None:
        return words

    def prepare_one() -> Any:
        from torchao.quantization import quantize_
        from torchao.quantization.qat import QATConfig

        layer = torch.nn.Sequential(torch.nn.Linear(16, 16, bias=False, dtype=torch.bfloat16, device=device))
        quantize_(layer, QATConfig(_config(), step="prepare"))
        return layer(torch.ones(16, 16, dtype=torch.bfloat16, device=device))

    ok, got = attempt(prepare_one, device)
    return None if ok else str(got)


WORKLOAD = Workload(
    name="qat",
    what="torchao float8 QAT (QATConfig around Float8DynamicActivationFloat8WeightConfig, per-row): prepare, "
    "two SGD steps, convert where the install allows",
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        # each step's forward fake-quantizes both layers' activations and weights: into E4M3 and back
        ("aten._to_copy.default", "cast"): 4 * STEPS,
        ("aten._to_copy.default", "values"): 4 * STEPS,
        # and its GEMMs of fake-quantized values: the 2 forward ones, the second layer's input
        # gradient and both layers' weight gradients
        ("aten.mm.default", "dequantized_gemm"): 5 * STEPS,
    },
)
