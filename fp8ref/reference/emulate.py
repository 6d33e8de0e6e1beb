"""Emulated FP8 GEMMs: quantize the operands as a recipe says, multiply the dequantized values in
high precision. This is the arithmetic an FP8 GEMM is meant to approximate (exact products of the
FP8 values, accumulated in high precision) and the reference the torchao and ``_scaled_mm`` checks
compare against.

Where the multiplication runs (``_gemm``), so that the reference never rests on a device's BLAS:
- operands on the CPU: a float32 matmul there, torch's CPU float32 GEMM. Kept in float32 on
  purpose: torchao's ``emulate=True`` layer multiplies the same float32 operands with the same
  CPU matmul, and the CPU checks compare the two bit for bit (tests/cpu/install/
  test_torchao_linear.py, the autocast answers the CPU golden pins, the reference's own tests);
  a float64 product rounded to float32 differs from it in the last bit of some sums.
- operands on another device (CUDA): moved to the CPU and multiplied in float64 (products of two
  float32 values exact, sums rounded at 2^-53), the float32 result returned to their device. No
  cuBLAS SGEMM, and so no TF32, enters the reference, whatever the process's matmul settings.
- inside ``install_float32_order()``: a float32 matmul on the operands' device with TF32 off, the
  order of the install's own float32 GEMM there, for a bitwise comparison with an implementation
  that emulates FP8 by that matmul on a GPU (torchao's ``emulate=True``, under autocast, say).
The dtypes returned are the same in each case.

- ``fp8_linear``: ``y = x @ w.T + b`` under a recipe from ``fp8ref.reference.recipes`` (default
  ``tensorwise``: E4M3 forward, E5M2 output gradient, as torchao and fp8_parity.py's smoke check).
- ``fp8_autocast``: the autocast-style context of a TransformerEngine-style delayed-scaling design
  (docs/design.md). While it is active, every ``torch.nn.functional.linear`` call (so every
  ``nn.Linear`` of an unmodified model) runs through an emulated FP8 linear with *delayed* scales
  from an ``Fp8State``; entering it counts one training step.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import nvfp4
from .delayed import Fp8State, TensorMeta
from .quantize import dequantize, quantize, quantize_with_scale
from .recipes import GemmRecipe, LinearRecipe, OperandCast, get_recipe
from .scaling import Kind, amax, tensorwise
from .validate import instance, positive_int, tensor

__all__ = [
    "install_float32_order",
    "full_float32_matmuls",
    "fp8_linear",
    "fp8_autocast",
    "Fp8LinearFunction",
    "cast_operand",
    "emulated_gemm",
    "Fp8Linear",
    "convert",
    "default_module_filter",
]


_INSTALL_ORDER: contextvars.ContextVar[bool] = contextvars.ContextVar("install_float32_order", default=False)


@contextlib.contextmanager
def full_float32_matmuls() -> Iterator[None]:
    """Every float32 matmul in the block in full float32: TF32 off on CUDA (torch's
    ``set_float32_matmul_precision("highest")``, which sets the legacy and the per-backend
    settings alike); the setting before is restored on exit."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def install_float32_order() -> Iterator[None]:
    """Inside, the reference's GEMMs are float32 matmuls on their operands' device (the install's
    float32 GEMM order there) and every float32 matmul runs without TF32 (``full_float32_matmuls``):
    for comparing, bit for bit, with an implementation that emulates FP8 by that same matmul."""
    token = _INSTALL_ORDER.set(True)
    try:
        with full_float32_matmuls():
            yield
    finally:
        _INSTALL_ORDER.reset(token)


def _gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` of two float32 operands, where the module docstring says, on ``a``'s device."""
    if _INSTALL_ORDER.get() or a.device.type == "cpu":
        return a @ b
    return _float64_on_cpu(a, b)


def _float64_on_cpu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` in float64 on the CPU, rounded once to float32, on ``a``'s device."""
    return (a.cpu().double() @ b.cpu().double()).float().to(a.device)


def _column_sums(g: torch.Tensor) -> torch.Tensor:
    """``g.float().sum(0)``, by the same rule as ``_gemm`` (the bias gradient)."""
    if _INSTALL_ORDER.get() or g.device.type == "cpu":
        return g.float().sum(0)
    return g.cpu().double().sum(0).float().to(g.device)


def cast_operand(t: torch.Tensor, op: OperandCast) -> torch.Tensor:
    """One GEMM operand (contraction-last) as the recipe casts it, dequantized to float32."""
    if op.fmt is None:
        return t.float()
    if op.granularity.kind == Kind.NVFP4:
        level = nvfp4.Level.TWO if op.granularity.two_level else nvfp4.Level.SINGLE
        return nvfp4.quantize_current(t, level, rounding=op.rounding).dequantize(torch.float32)
    if op.static_scale is not None:
        q = quantize_with_scale(t, op.static_scale, op.fmt, rounding=op.rounding)
    else:
        q = quantize(t, op.fmt, op.granularity, pow2=op.pow2, rounding=op.rounding)
    return dequantize(q, torch.float32)


def emulated_gemm(a: torch.Tensor, b: torch.Tensor, gemm: GemmRecipe) -> torch.Tensor:
    """``A @ B^T`` of the FP8 values (``_gemm``), A and B contraction-last."""
    return _gemm(cast_operand(a, gemm.a), cast_operand(b, gemm.b).t())


def _forward(
    ctx: Any, xd: torch.Tensor, wd: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor, w: torch.Tensor
) -> torch.Tensor:
    """Save the dequantized operands and return ``xd @ wd.T + bias`` (``_gemm``) in x's dtype."""
    ctx.save_for_backward(xd, wd)
    ctx.has_bias, ctx.dtypes = bias is not None, (x.dtype, w.dtype)
    y = _gemm(xd, wd.t())
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def _backward(ctx: Any, gd: torch.Tensor, xd: torch.Tensor, wd: torch.Tensor) -> tuple:
    """grad_x = g @ w, grad_w = g^T @ x over the flattened leading dims, grad_b = sum g; each
    in its input's dtype. ``gd``, ``xd``, ``wd`` are already-cast float32 operands."""
    x_dtype, w_dtype = ctx.dtypes
    g2, x2 = gd.reshape(-1, gd.shape[-1]), xd.reshape(-1, xd.shape[-1])
    grad_x = _gemm(g2, wd).reshape(*gd.shape[:-1], wd.shape[1]).to(x_dtype)
    grad_w = _gemm(g2.t(), x2).to(w_dtype)
    grad_b = _column_sums(g2).to(w_dtype) if ctx.has_bias else None
    return grad_x, grad_w, grad_b


class Fp8LinearFunction(torch.autograd.Function):
    """Emulated FP8 linear: each of the three GEMMs casts its operands as the recipe says."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, recipe: LinearRecipe
    ) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(x, w)
        ctx.recipe, ctx.has_bias, ctx.dtypes = recipe, bias is not None, (x.dtype, w.dtype)
        y = emulated_gemm(x2, w, recipe.output)
        if bias is not None:
            y = y + bias.float()
        return y.reshape(*x.shape[:-1], w.shape[0]).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        r = ctx.recipe
        x_dtype, w_dtype = ctx.dtypes
        g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
        grad_x = emulated_gemm(g2, w.t(), r.grad_input).reshape(*g.shape[:-1], w.shape[1]).to(x_dtype)
        grad_w = emulated_gemm(g2.t(), x2.t(), r.grad_weight).to(w_dtype)
        grad_b = _column_sums(g2).to(w_dtype) if ctx.has_bias else None
        return grad_x, grad_w, grad_b, None


def fp8_linear(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, recipe: str | LinearRecipe = "tensorwise"
) -> torch.Tensor:
    """Emulated FP8 ``F.linear`` under a recipe (``fp8ref.reference.recipes``); differentiable in x, w, bias."""
    tensor(x, "x", floating=True)
    tensor(w, "w", floating=True)
    if w.dim() != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(
            f"w: expected shape (out, {x.shape[-1]}) for x of shape {tuple(x.shape)}, got {tuple(w.shape)}"
        )
    return Fp8LinearFunction.apply(x, w, bias, get_recipe(recipe))


class Fp8Linear(torch.nn.Linear):
    """A reference FP8 ``nn.Linear``: the same parameters, every GEMM emulated under ``recipe``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        recipe: str | LinearRecipe = "tensorwise",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe = get_recipe(recipe)

    @classmethod
    def from_linear(cls, mod: torch.nn.Linear, recipe: str | LinearRecipe = "tensorwise") -> Fp8Linear:
        """Wrap an existing ``nn.Linear``, sharing its parameters (no copy)."""
        instance(mod, torch.nn.Linear, "mod", "an nn.Linear")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = mod.in_features, mod.out_features
        new.weight, new.bias = mod.weight, mod.bias
        new.recipe = get_recipe(recipe)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.weight, self.bias, self.recipe)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recipe={self.recipe.name}"


def default_module_filter(mod: torch.nn.Module, fqn: str) -> bool:
    """fp8_parity.py's filter: skip the LM head and any Linear whose dims are not multiples of 16
    (``torch._scaled_mm`` needs them)."""
    if fqn.endswith("lm_head"):
        return False
    if isinstance(mod, torch.nn.Linear):
        return mod.in_features % 16 == 0 and mod.out_features % 16 == 0
    return True


def convert(
    model: torch.nn.Module,
    recipe: str | LinearRecipe = "tensorwise",
    module_filter_fn: Callable[[torch.nn.Module, str], bool] = default_module_filter,
) -> torch.nn.Module:
    """Swap every ``nn.Linear`` that ``module_filter_fn(module, fqn)`` accepts for a
    ``Fp8Linear`` sharing its parameters, in place; returns the model."""
    instance(model, torch.nn.Module, "model", "an nn.Module")
    recipe = get_recipe(recipe)
    for fqn, mod in list(model.named_modules()):
        for name, child in list(mod.named_children()):
            child_fqn = f"{fqn}.{name}" if fqn else name
            if type(child) is torch.nn.Linear and module_filter_fn(child, child_fqn):
                setattr(mod, name, Fp8Linear.from_linear(child, recipe))
    return model


class _DelayedFp8LinearFunction(torch.autograd.Function):
    """The delayed-scaling design's linear: scales from a TensorMeta, amaxes recorded after use."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, meta: TensorMeta
    ) -> torch.Tensor:
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
        return (*_backward(ctx, gd, *ctx.saved_tensors), None)


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


@contextlib.contextmanager
def fp8_autocast(
    enabled: bool = True, update_interval: int | None = None, state: Fp8State | None = None
) -> Iterator[Fp8State]:
    """Route ``F.linear`` through delayed-scaling emulated FP8 while active (the delayed-scaling design).

    Entering counts one training step (``state.step()``), which refreshes every weight scale
    each ``update_interval`` steps. ``enabled=False`` leaves ``F.linear`` alone.
    """
    st = state if state is not None else _STATE
    instance(st, Fp8State, "state", "an Fp8State")
    prev = (st.enabled, st.update_interval)
    st.enabled = bool(enabled)
    if update_interval is not None:
        st.update_interval = positive_int(update_interval, "update_interval")
    try:
        if enabled:
            st.step()
        with _Fp8LinearMode(st):
            yield st
    finally:
        st.enabled, st.update_interval = prev
