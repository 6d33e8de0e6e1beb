"""FP8 layers under ``torch.compile``, with static shapes and with dynamic ones: a 2-layer MLP
as the ``exported`` workload's (float8 weights, inputs cast with a dynamic tensorwise scale,
``_scaled_mm``), each layer's forward a compiled region that returns its output and its input's
float8 codes. ``static``: ``dynamic=False``, two batches of one shape; ``dynamic``:
``dynamic=True``, batches of 16, 24 and 32 rows through graphs with a symbolic batch size.
``run`` resets nothing: whoever compares compiled runs starts dynamo afresh (the tests'
``fresh_dynamo``).

Traced as any workload, torch.compile runs the regions eagerly and every op is checked (and
pinned); run again with the regions compiled (``trace.compiled.compare_compiled``, in
tests/cpu/install/test_workloads.py), their outputs must be the eager run's bit for bit: the fused
cast inside the generated kernel is checked at the region's boundary."""

from __future__ import annotations

import functools

import torch

from ..stack.probes import scaled_mm_refusal
from ..stack.refusals import attempt
from . import tiny
from .base import Workload
from .exported import E4M3, W_S

__all__ = ["WORKLOADS", "run", "compiled_refusal"]

BATCHES = {"static": (16, 16), "dynamic": (16, 24, 32)}


def _layer(x: torch.Tensor, weight_f8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One FP8 linear: ``x`` cast with its tensorwise scale, times the float8 weight; (output,
    the input's codes)."""
    scale = 448.0 / x.abs().amax().float().clamp(min=1e-12)
    x_f8 = (x.float() * scale).clamp(-448.0, 448.0).to(E4M3)
    out = torch._scaled_mm(
        x_f8, weight_f8.t(), scale_a=scale.reciprocal(), scale_b=torch.tensor(W_S, device=x.device), out_dtype=x.dtype
    )
    return out, x_f8


def run(shapes: str) -> list[torch.Tensor]:
    """The compiled layers on each batch of ``BATCHES[shapes]``: every region's output and codes."""
    region = torch.compile(_layer, dynamic=shapes == "dynamic")
    weights = [(m.weight.detach().float() / W_S).to(E4M3) for m in tiny.mlp() if isinstance(m, torch.nn.Linear)]
    outs: list[torch.Tensor] = []
    for step, rows in enumerate(BATCHES[shapes]):
        h = tiny.batch(step, rows=rows)[0]
        for i, w in enumerate(weights):
            h, codes = region(h, w)
            outs += [h, codes]
            h = torch.relu(h) if i + 1 < len(weights) else h
    return outs


def refusal(device: str = "cpu") -> str | None:
    """The install's words when ``_scaled_mm`` takes no tensorwise E4M3 GEMM into bfloat16 (the
    eager run, what the tracer checks op by op; whether torch.compile takes the regions is asked
    where they run compiled, ``compiled_refusal``)."""
    return scaled_mm_refusal("tensorwise", torch.bfloat16, device)


def compiled_refusal(device: str = "cpu") -> str | None:
    """The install's words when torch.compile refuses the layer on ``device`` (one call, compiled)."""
    w = torch.ones(16, 16, device=device).to(E4M3)
    x = torch.ones(16, 16, dtype=torch.bfloat16, device=device)
    ok, got = attempt(lambda: torch.compile(_layer, dynamic=False)(x, w), device)
    return None if ok else str(got)


WORKLOADS = {
    f"compiled.{shapes}": Workload(
        name=f"compiled.{shapes}",
        what=f"FP8 linears (dynamic tensorwise casts, _scaled_mm) as torch.compile regions, {shapes} shapes "
        f"(batches {', '.join(map(str, batches))})",
        module=__name__,
        run=functools.partial(run, shapes),
        refusal=refusal,
        expects={
            ("aten._to_copy.default", "cast"): 2 + 2 * len(batches),  # the weights; each layer's input
            ("aten._scaled_mm.default", "scaled_mm"): 2 * len(batches),
        },
        torchao=False,
        compiled=True,
    )
    for shapes, batches in BATCHES.items()
}
