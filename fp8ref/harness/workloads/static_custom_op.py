"""A modded-nanogpt-style hand-written FP8 linear: a ``torch.library.custom_op`` around
``torch._scaled_mm`` with static scales (E4M3 forward, E5M2 gradients), whose weight is kept as a
cached float8 copy, re-quantized in place (``copy_`` into the cached buffer) after every
optimizer step. Two SGD steps of a 2-layer MLP.

modded-nanogpt's own static scales (x/2, w/32, gradient/2^29) fit its lm_head; these fit this
tiny model's ranges (inputs near 1, weights near 1/8, loss gradients near 1/1000), as a team
picks its own."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..stack.probes import scaled_mm_refusal
from . import tiny
from .base import Workload

__all__ = ["WORKLOAD", "run", "StaticFp8Linear"]

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
X_S, W_S, G_S = 2.0, 2.0**-4, 2.0**-10  # the value each cast divides by; _scaled_mm multiplies back
STEPS = 2


@functools.cache
def _ops() -> Any:
    """The custom op (registered once per process, on first use): ``(x, w, w_f8) -> (out, x_f8)``,
    forward with the cached ``w_f8``; its backward casts the gradient to E5M2 and runs two more
    scaled GEMMs. ``w`` is an input only so that autograd gives it the gradient."""

    @torch.library.custom_op("fp8ref_workloads::static_fp8_mm", mutates_args=())
    def fp8_mm(x: torch.Tensor, w: torch.Tensor, w_f8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x_f8 = (x / X_S).to(E4M3)
        out = torch._scaled_mm(
            x_f8,
            w_f8.t(),
            scale_a=x.new_tensor(X_S, dtype=torch.float32),
            scale_b=x.new_tensor(W_S, dtype=torch.float32),
            out_dtype=x.dtype,
        )
        return out, x_f8

    @torch.library.custom_op("fp8ref_workloads::static_fp8_mm_backward", mutates_args=())
    def fp8_mm_backward(g: torch.Tensor, x_f8: torch.Tensor, w_f8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        one = g.new_tensor(1.0, dtype=torch.float32)
        g_f8 = (g / G_S).to(E5M2)
        grad_x = torch._scaled_mm(
            g_f8, w_f8.t().contiguous().t(), scale_a=one * G_S, scale_b=one * W_S, out_dtype=g.dtype
        )
        grad_w = torch._scaled_mm(
            g_f8.t().contiguous(),
            x_f8.t().contiguous().t(),
            scale_a=one * G_S,
            scale_b=one * X_S,
            out_dtype=torch.float32,
        )
        return grad_x, grad_w

    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        ctx.save_for_backward(output[1], inputs[2])
        ctx.weight_dtype = inputs[1].dtype

    def backward(ctx: Any, grad_out: torch.Tensor, _: Any) -> tuple:
        x_f8, w_f8 = ctx.saved_tensors
        grad_x, grad_w = fp8_mm_backward(grad_out, x_f8, w_f8)
        return grad_x, grad_w.to(ctx.weight_dtype), None

    fp8_mm.register_autograd(backward, setup_context=setup_context)
    return fp8_mm


class StaticFp8Linear(torch.nn.Module):
    """A Linear without bias whose forward multiplies through the custom op, with the weight's
    cached float8 copy (``weight_f8``, a buffer) refreshed by ``requantize()``."""

    weight_f8: torch.Tensor

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight
        self.register_buffer("weight_f8", (linear.weight.detach() / W_S).to(E4M3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops()(x, self.weight, self.weight_f8)[0]

    @torch.no_grad()
    def requantize(self) -> None:
        self.weight_f8.copy_(self.weight / W_S)  # the cached codes rewritten in place


def run() -> list[float]:
    """Two SGD steps, each followed by the re-quantization of every cached weight; the losses."""
    model = tiny.mlp()
    for i, layer in enumerate(model):
        if isinstance(layer, torch.nn.Linear):
            model[i] = StaticFp8Linear(layer)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, target = tiny.batch(step)
        loss = (model(x) - target).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        for layer in model:
            if isinstance(layer, StaticFp8Linear):
                layer.requantize()
        losses.append(loss.item())
    return losses


def refusal(device: str = "cpu") -> str | None:
    """The install's words when ``_scaled_mm`` takes no tensorwise E4M3 GEMM into bfloat16 or float32."""
    return scaled_mm_refusal("tensorwise", torch.bfloat16, device) or scaled_mm_refusal(
        "tensorwise", torch.float32, device
    )


WORKLOAD = Workload(
    name="static_custom_op",
    what="a modded-nanogpt-style custom op around _scaled_mm: static scales, cached float8 weights re-quantized",
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        ("aten._to_copy.default", "cast"): 2,  # the cached weights
        # x and g of each layer and step, cast inside the op: below autograd, Tensor.to reaches the
        # tracer as aten.to itself, held to the codec as _to_copy is
        ("aten.to.dtype", "cast"): 2 * 2 * STEPS,
        ("aten._scaled_mm.default", "scaled_mm"): 6 * STEPS,
        ("aten.copy_.default", "cast"): 2 * STEPS,  # the re-quantizations
    },
    torchao=False,
)
