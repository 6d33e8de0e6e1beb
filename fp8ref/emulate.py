"""Emulated FP8 GEMMs: quantize the operands as a recipe says, multiply the dequantized values in
float32. This is the arithmetic an FP8 GEMM is meant to approximate (exact products of the FP8
values, accumulated in high precision) and the reference the torchao and ``_scaled_mm`` checks
compare against.

- ``fp8_linear``: ``y = x @ w.T + b`` with current scaling; forward operands in ``fwd_fmt``, the
  output gradient in ``bwd_fmt`` (E4M3 forward, E5M2 backward is torchao's tensorwise recipe and
  the seed's smoke check).
- ``fp8_autocast``: the seed design's autocast-style context. While it is active, every
  ``torch.nn.functional.linear`` call (so every ``nn.Linear`` of an unmodified model) runs through
  an emulated FP8 linear with *delayed* scales from an ``Fp8State``; entering it counts one
  training step.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .delayed import Fp8State, TensorMeta
from .formats import E4M3FN, E5M2, Fp8Format, get_format
from .quantize import dequantize, quantize, quantize_with_scale
from .scaling import Granularity, amax, tensorwise

__all__ = ["fp8_linear", "fp8_autocast", "fp8_state", "Fp8LinearFunction"]


def _qdq(t: torch.Tensor, fmt: Fp8Format, granularity: Granularity, pow2: bool) -> torch.Tensor:
    return dequantize(quantize(t, fmt, granularity, pow2=pow2), torch.float32)


def _forward(ctx, xd: torch.Tensor, wd: torch.Tensor, bias, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Save the dequantized operands and return ``xd @ wd.T + bias`` (float32 math) in x's dtype."""
    ctx.save_for_backward(xd, wd)
    ctx.has_bias, ctx.dtypes = bias is not None, (x.dtype, w.dtype)
    y = xd @ wd.t()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def _backward(ctx, gd: torch.Tensor) -> tuple:
    """grad_x = g @ w, grad_w = g^T @ x over the flattened leading dims, grad_b = sum g; each
    in its input's dtype."""
    xd, wd = ctx.saved_tensors
    x_dtype, w_dtype = ctx.dtypes
    g2, x2 = gd.reshape(-1, gd.shape[-1]), xd.reshape(-1, xd.shape[-1])
    grad_x = (g2 @ wd).reshape(*gd.shape[:-1], wd.shape[1]).to(x_dtype)
    grad_w = (g2.t() @ x2).to(w_dtype)
    grad_b = g2.sum(0).to(w_dtype) if ctx.has_bias else None
    return grad_x, grad_w, grad_b


class Fp8LinearFunction(torch.autograd.Function):
    """Current-scaling emulated FP8 linear (one scale per operand, at ``granularity``)."""

    @staticmethod
    def forward(ctx, x, w, bias, fwd_fmt, bwd_fmt, granularity, pow2):
        ctx.conf = (bwd_fmt, granularity, pow2)
        return _forward(ctx, _qdq(x, fwd_fmt, granularity, pow2), _qdq(w, fwd_fmt, granularity, pow2), bias, x, w)

    @staticmethod
    def backward(ctx, g):
        bwd_fmt, granularity, pow2 = ctx.conf
        return (*_backward(ctx, _qdq(g, bwd_fmt, granularity, pow2)), None, None, None, None)


def fp8_linear(x: torch.Tensor, w: torch.Tensor, bias: "torch.Tensor | None" = None, *,
               fwd_fmt: "str | Fp8Format" = E4M3FN, bwd_fmt: "str | Fp8Format" = E5M2,
               granularity: "Granularity | None" = None, pow2: bool = False) -> torch.Tensor:
    """Emulated FP8 ``F.linear`` with current scaling; differentiable in x, w and bias."""
    for name, t in (("x", x), ("w", w)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise TypeError(f"{name}: expected a floating-point torch.Tensor, got {type(t).__name__}")
    if w.dim() != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"w: expected shape (out, {x.shape[-1]}) for x of shape {tuple(x.shape)}, "
                         f"got {tuple(w.shape)}")
    return Fp8LinearFunction.apply(x, w, bias, get_format(fwd_fmt), get_format(bwd_fmt),
                                   granularity or tensorwise(), pow2)


class _DelayedFp8LinearFunction(torch.autograd.Function):
    """The seed's delayed-scaling linear: scales from a TensorMeta, amaxes recorded after use."""

    @staticmethod
    def forward(ctx, x, w, bias, meta: TensorMeta):
        xq = quantize_with_scale(x, meta.x_scale, meta.fmt)
        wq = quantize_with_scale(w, meta.w_scale, meta.fmt)
        meta.record(amax(w, tensorwise()))
        meta.update_x(amax(x, tensorwise()))  # used by the *next* call
        ctx.meta = meta
        return _forward(ctx, dequantize(xq, torch.float32), dequantize(wq, torch.float32), bias, x, w)

    @staticmethod
    def backward(ctx, g):
        meta = ctx.meta
        gd = dequantize(quantize_with_scale(g, meta.g_scale, meta.grad_fmt), torch.float32)
        meta.update_g(amax(g, tensorwise()))
        return (*_backward(ctx, gd), None)


class _Fp8LinearMode(TorchFunctionMode):
    def __init__(self, state: Fp8State):
        super().__init__()
        self.state = state

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear and self.state.enabled:
            x, w = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            return _DelayedFp8LinearFunction.apply(x, w, bias, self.state.meta_for(w))
        return func(*args, **kwargs)


_STATE = Fp8State()


def fp8_state() -> Fp8State:
    """The process-wide state ``fp8_autocast`` uses unless given one."""
    return _STATE


@contextlib.contextmanager
def fp8_autocast(enabled: bool = True, update_interval: "int | None" = None, state: "Fp8State | None" = None):
    """Route ``F.linear`` through delayed-scaling emulated FP8 while active (seed design).

    Entering counts one training step (``state.step()``), which refreshes every weight scale
    each ``update_interval`` steps. ``enabled=False`` leaves ``F.linear`` alone.
    """
    st = state if state is not None else _STATE
    if not isinstance(st, Fp8State):
        raise TypeError(f"state: expected an Fp8State, got {type(st).__name__}")
    prev = (st.enabled, st.update_interval)
    st.enabled = bool(enabled)
    if update_interval is not None:
        if not isinstance(update_interval, int) or update_interval < 1:
            raise ValueError(f"update_interval: expected a positive int, got {update_interval!r}")
        st.update_interval = update_interval
    try:
        if enabled:
            st.step()
        with _Fp8LinearMode(st):
            yield st
    finally:
        st.enabled, st.update_interval = prev
