"""An FP8 model through ``torch.export``: a 2-layer MLP whose linears keep float8 weights (E4M3,
a static scale) and cast their input with a dynamic tensorwise scale before ``_scaled_mm``, as a
team ships FP8 inference. Exported with a dynamic batch dimension, decomposed
(``run_decompositions``), saved (``torch.export.save``) and loaded (``torch.export.load``); the
loaded program runs at two batch sizes, and the eager model at the same ones.

Exporting traces the program on fake tensors, which the tracer lets pass (no values); what it
checks is the save (the float8 weights serialized), the load and every FP8 op the loaded program
runs. The loaded program must give the eager model's outputs bit for bit (``holds``): the same
ops on the same codes."""

from __future__ import annotations

import functools
import io
import warnings

import torch

from ..stack.probes import scaled_mm_refusal
from ..stack.refusals import attempt
from . import tiny
from .base import Workload

__all__ = ["WORKLOAD", "run", "Fp8Linear"]

E4M3 = torch.float8_e4m3fn
W_S = 2.0**-4  # the weights' static scale (they lie near 1/8)
BATCHES = (16, 24)  # the loaded program runs at both: its batch dimension is dynamic


class Fp8Linear(torch.nn.Module):
    """A Linear without bias holding its weight as float8 codes (``weight_f8``, a buffer)."""

    weight_f8: torch.Tensor

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.register_buffer("weight_f8", (linear.weight.detach().float() / W_S).to(E4M3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 448.0 / x.abs().amax().float().clamp(min=1e-12)  # tensorwise, from this input's amax
        x_f8 = (x.float() * scale).clamp(-448.0, 448.0).to(E4M3)
        return torch._scaled_mm(
            x_f8,
            self.weight_f8.t(),
            scale_a=scale.reciprocal(),
            scale_b=torch.tensor(W_S, device=x.device),
            out_dtype=x.dtype,
        )


def _model() -> torch.nn.Sequential:
    model = tiny.mlp()
    for i, layer in enumerate(model):
        if isinstance(layer, torch.nn.Linear):
            model[i] = Fp8Linear(layer)
    return model


def _round_trip(model: torch.nn.Module, x: torch.Tensor) -> torch.nn.Module:
    """``model`` exported (batch dimension dynamic), decomposed, saved and loaded: the module of
    the loaded program."""
    batch = torch.export.Dim("batch", min=2, max=64)
    with warnings.catch_warnings():  # (torch.export's own notes on its internals, not on this program)
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)  # (2.13's pytree)
        warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)  # (2.9.1)
        program = torch.export.export(model, (x,), dynamic_shapes=({0: batch},)).run_decompositions()
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        buffer.seek(0)
        return torch.export.load(buffer).module()


def run() -> dict[str, list[torch.Tensor]]:
    """The loaded program's outputs and the eager model's, at each of ``BATCHES``."""
    model = _model()
    inputs = [tiny.batch(step, rows=rows)[0] for step, rows in enumerate(BATCHES)]
    loaded = _round_trip(model, inputs[0])
    return {"loaded": [loaded(x) for x in inputs], "eager": [model(x) for x in inputs]}


def holds(result: dict[str, list[torch.Tensor]]) -> str | None:
    """None when the loaded program gave the eager model's outputs bit for bit at every batch."""
    if not len(result["loaded"]) == len(result["eager"]) == len(BATCHES):
        return f"{len(result['loaded'])} outputs of the loaded program, {len(result['eager'])} of the eager model"
    for rows, got, want in zip(BATCHES, result["loaded"], result["eager"]):
        same = got.dtype == want.dtype and got.shape == want.shape
        if not same or not torch.equal(got.view(torch.int16), want.view(torch.int16)):
            return f"the loaded program's output at batch {rows} is not the eager model's, bit for bit"
    return None


@functools.cache  # (a fact of the install: asked by the profile and by the test, answered once)
def refusal(device: str = "cpu") -> str | None:
    """The install's words when ``_scaled_mm`` takes no tensorwise E4M3 GEMM into bfloat16, or
    ``torch.export`` refuses a float8 buffer: one small layer exported, saved and loaded."""
    words = scaled_mm_refusal("tensorwise", torch.bfloat16, device)
    if words is not None:
        return words
    layer = torch.nn.Sequential(Fp8Linear(torch.nn.Linear(16, 16, bias=False, device=device)))
    ok, got = attempt(lambda: _round_trip(layer, torch.ones(16, 16, dtype=torch.bfloat16, device=device)), device)
    return None if ok else str(got)


WORKLOAD = Workload(
    name="exported",
    what="an FP8 MLP (float8 weights, dynamic tensorwise inputs) through torch.export: dynamic batch, "
    "decomposed, saved, loaded and run at two batch sizes",
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        ("aten._to_copy.default", "cast"): 2 + 2 * 2 * len(BATCHES),  # the weights; inputs, loaded and eager
        ("aten._scaled_mm.default", "scaled_mm"): 2 * 2 * len(BATCHES),
    },
    holds=holds,
    torchao=False,
)
