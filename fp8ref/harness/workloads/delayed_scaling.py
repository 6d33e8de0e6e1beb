"""A TransformerEngine-style delayed-scaling FP8 autocast written in plain torch: inside
``fp8_autocast(state)`` every ``F.linear`` casts its input and weight to E4M3 and its output
gradient to E5M2 with scales from an amax history of 16 steps per tensor (TransformerEngine's
``DelayedScaling`` rule, ``fp8ref.reference.delayed``), so each scale comes from the steps before
(delayed one step); the metadata is keyed by the weight (``Fp8State.key``). The casts (clamped to
the format's range, as TransformerEngine's saturating casts) and GEMMs are torch's own
(``Tensor.to``, ``torch._scaled_mm``). Three SGD steps of a 2-layer MLP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ...reference.delayed import DelayedScaling, Fp8State
from ...reference.formats import E4M3FN, E5M2
from . import tiny
from .base import Workload
from .static_custom_op import refusal

__all__ = ["WORKLOAD", "run", "fp8_autocast", "HISTORY"]

HISTORY = 16
STEPS = 3


class _Meta:
    """One weight's scaling state: its input's, its own and its output gradient's histories."""

    def __init__(self) -> None:
        self.x = DelayedScaling(E4M3FN, history_len=HISTORY)
        self.w = DelayedScaling(E4M3FN, history_len=HISTORY)
        self.g = DelayedScaling(E5M2, history_len=HISTORY)


def _cast(t: torch.Tensor, ds: DelayedScaling) -> tuple[torch.Tensor, torch.Tensor]:
    """``t`` in float8 with the delayed scale (then its amax recorded for the next step), and the
    scale's inverse for ``_scaled_mm``."""
    scale = ds.scale
    dtype = ds.fmt.torch_dtype()
    codes = (t.float() * scale).clamp(-ds.fmt.max, ds.fmt.max).to(dtype)
    ds.update(t.detach().abs().max().float())
    return codes, (1.0 / scale).to(t.device, torch.float32)


class _Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, meta: _Meta) -> torch.Tensor:
        x_f8, x_inv = _cast(x, meta.x)
        w_f8, w_inv = _cast(w, meta.w)
        ctx.save_for_backward(x_f8, w_f8, x_inv, w_inv)
        ctx.meta, ctx.w_dtype = meta, w.dtype
        return torch._scaled_mm(x_f8, w_f8.t(), scale_a=x_inv, scale_b=w_inv, out_dtype=x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:
        x_f8, w_f8, x_inv, w_inv = ctx.saved_tensors
        g_f8, g_inv = _cast(g, ctx.meta.g)
        grad_x = torch._scaled_mm(g_f8, w_f8.t().contiguous().t(), scale_a=g_inv, scale_b=w_inv, out_dtype=g.dtype)
        grad_w = torch._scaled_mm(
            g_f8.t().contiguous(), x_f8.t().contiguous().t(), scale_a=g_inv, scale_b=x_inv, out_dtype=torch.float32
        )
        return grad_x, grad_w.to(ctx.w_dtype), None


class _Autocast(TorchFunctionMode):
    def __init__(self, metas: dict) -> None:
        super().__init__()
        self.metas = metas

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear and kwargs.get("bias", args[2] if len(args) > 2 else None) is None:
            x, w = args[0], args[1]
            meta = self.metas.setdefault(Fp8State.key(w), _Meta())
            return _Fp8Linear.apply(x, w, meta)
        return func(*args, **kwargs)


@contextlib.contextmanager
def fp8_autocast(metas: dict) -> Iterator[dict]:
    """Every bias-free ``F.linear`` in the block through the delayed-scaling FP8 linear, its
    scaling state kept in ``metas`` (weight key -> state) across blocks."""
    with _Autocast(metas):
        yield metas


def run() -> list[float]:
    """Three SGD steps of the MLP under the autocast; the losses."""
    model = tiny.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    metas: dict = {}
    losses = []
    for step in range(STEPS):
        x, target = tiny.batch(step)
        with fp8_autocast(metas):
            loss = (model(x) - target).float().pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


WORKLOAD = Workload(
    name="delayed_scaling",
    what="a TransformerEngine-style delayed-scaling autocast in plain torch: 16-step amax histories, three steps",
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        ("aten._to_copy.default", "cast"): 6 * STEPS,  # x, w and g of each of 2 layers
        ("aten._scaled_mm.default", "scaled_mm"): 6 * STEPS,
    },
    torchao=False,
)
