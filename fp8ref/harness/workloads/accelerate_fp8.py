"""accelerate's torchao FP8 path: ``Accelerator(mixed_precision="fp8",
kwargs_handlers=[AORecipeKwargs()])`` prepares a small transformers model (a one-layer Llama built
from its config, no download), converting its linears to torchao's Float8Linear (accelerate
leaves the first and last ones, and those whose sizes are not multiples of 16, in high
precision); two SGD steps of the causal-LM loss through ``accelerator.backward``."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..stack.probes import torchao_recipe_refusal
from ..stack.refusals import attempt, import_refusal
from . import tiny
from .base import Workload

__all__ = ["WORKLOAD", "run"]

STEPS = 2


def _fresh_state() -> None:
    """accelerate keeps one process-wide state (its first Accelerator's precision): reset, so this
    workload's Accelerator is its own and leaves none behind."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def _model() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(tiny.SEED)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config).to(torch.bfloat16)  # type: ignore[arg-type]  # (nn.Module.to: a dtype)


def _accelerator(device: str) -> Any:
    """accelerate's FP8 Accelerator with torchao's recipe, on the CPU or on the (current) CUDA device."""
    from accelerate import Accelerator
    from accelerate.utils import AORecipeKwargs

    return Accelerator(mixed_precision="fp8", kwargs_handlers=[AORecipeKwargs()], cpu=device == "cpu")


def run() -> list[float]:
    """Two steps of the prepared model; the losses."""
    _fresh_state()
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        accelerator = _accelerator(tiny.device())
        model, opt = accelerator.prepare(model, opt)
        ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(tiny.SEED + 1))
        ids = ids.to(accelerator.device)
        losses = []
        for _ in range(STEPS):
            loss = model(input_ids=ids, labels=ids).loss
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses
    finally:
        _fresh_state()


@functools.cache  # (a fact of the install: asked by the profile and by the test, answered once)
def refusal(device: str = "cpu") -> str | None:
    """The install's words when accelerate's AORecipeKwargs, transformers' Llama or torchao's
    tensorwise Float8Linear is not there, or accelerate refuses to prepare one FP8 Linear."""
    words = (
        import_refusal("accelerate.utils", ("AORecipeKwargs",))
        or import_refusal("transformers", ("LlamaConfig", "LlamaForCausalLM"))
        or torchao_recipe_refusal("tensorwise", device)
    )
    if words is not None:
        return words

    def prepare_one() -> Any:
        _fresh_state()
        try:
            return _accelerator(device).prepare(torch.nn.Sequential(torch.nn.Linear(16, 16, bias=False)))
        finally:
            _fresh_state()

    ok, got = attempt(prepare_one, device)
    return None if ok else str(got)


WORKLOAD = Workload(
    name="accelerate_fp8",
    what="accelerate's FP8 path (mixed_precision='fp8', AORecipeKwargs) on a one-layer Llama, two SGD steps",
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        # the six inner linears (q, k, v, o, gate/up, down: not the first or last), each step
        # casting input and weight forward, and the output gradient twice backward
        ("aten._to_copy.default", "cast"): 6 * 4 * STEPS,
        ("aten._scaled_mm.default", "scaled_mm"): 6 * 3 * STEPS,
    },
)
