"""Delayed scaling state: scales computed from an amax history instead of the current tensor.

Two forms:

``DelayedScaling`` — TransformerEngine's recipe (``transformer_engine.common.recipe.DelayedScaling``):
an amax history of ``history_len`` steps, reduced by ``max`` or ``most_recent``, ``margin``.
The scale used at step t comes from amaxes recorded *before* step t. Its scale rule (``rule``):

- ``te`` (the default): TE's ``_default_sf_compute`` (transformer_engine/pytorch/quantization.py)
  with the arithmetic PyTorch performs for it: ``sf = (fp8_max / amax) / 2**margin`` in float32,
  where ``fp8_max / amax`` on a tensor is ``amax.reciprocal() * fp8_max`` (torch's
  ``Tensor.__rtruediv__``), i.e. two roundings, so it is one float32 ulp away from the correctly
  rounded quotient for about a quarter of all amax values; the previous scale is kept when amax
  is 0 (or negative) or not finite; an infinite sf (amax below fp8_max / float32 max, ~1.3e-36
  for E4M3) becomes float32's max. ``te_scale`` computes it without calling torch's division.
- ``torchao``: torchao's ``amax_to_scale`` (float64, amax clamped to at least 1e-12, one
  rounding to float32) with the same keep-previous rule, the form of the delayed-scaling design
  below. The two agree bitwise where TE's two roundings happen to give the correctly rounded
  quotient and amax >= 1e-12; below 1e-12 torchao's clamp caps the scale at fp8_max * 1e12.

``Fp8State`` / ``TensorMeta`` — the form of a TransformerEngine-style delayed-scaling design
(docs/design.md): per-weight meta keyed by the weight's identity (data pointer, shape, dtype); the
weight's scale refreshed every ``update_interval`` steps from its history window (max); the
activation and gradient scales delayed by exactly one call (the amax of call t sets the scale
of call t+1). That design's code would turn an inf amax into a zero scale; here the same
keep-previous rule as TE applies, so one bad step cannot poison the scales.

All scales use torchao's convention (multiplied on quantize); ``.scale_inv`` gives TE's.
"""

from __future__ import annotations

from typing import Any

import torch

from .formats import E4M3FN, FloatFormat, get_format
from .scaling import amax_to_scale, round_down_to_pow2
from .validate import Choice, boolean, choice, instance, integer, positive_int, tensor

__all__ = ["AmaxAlgo", "ScaleRule", "te_scale", "DelayedScaling", "TensorMeta", "Fp8State"]

_F32_MAX = 3.4028234663852886e38  # float32's largest finite value, (2 - 2^-23) * 2^127


class AmaxAlgo(Choice):
    """How TransformerEngine reduces the amax history to one amax."""

    MAX = "max"  # the largest amax in the window
    MOST_RECENT = "most_recent"  # the latest amax


class ScaleRule(Choice):
    """How a delayed scale is computed from the reduced amax (see the module docstring)."""

    TE = "te"  # TransformerEngine's _default_sf_compute, float32 as PyTorch evaluates it
    TORCHAO = "torchao"  # torchao's amax_to_scale: float64 with the 1e-12 eps clamp


def _f32(x: torch.Tensor) -> torch.Tensor:
    """Round float64 values to float32 (round to nearest even, once)."""
    return x.to(torch.float32)


def te_scale(
    amax: torch.Tensor, previous: torch.Tensor, fmt: str | FloatFormat = E4M3FN, margin: int = 0
) -> torch.Tensor:
    """TransformerEngine's delayed-scaling scale, float32, elementwise over ``amax``.

    Each float32 operation of TE's rule is done in float64 (exact for these operands) and rounded
    once to float32: ``r = f32(1 / amax)``, ``q = f32(r * fp8_max)``, ``sf = f32(q / 2^margin)``;
    then ``previous`` where amax is not > 0 or not finite, and float32's max where sf is inf."""
    tensor(amax, "amax", floating=True)
    tensor(previous, "previous", floating=True)
    fmt = get_format(fmt)
    integer(margin, "margin")
    a = amax.to(torch.float32).to(torch.float64)
    with torch.no_grad():
        r = _f32(1.0 / a).to(torch.float64)  # amax.reciprocal(): 1/0 = inf, as in float32
        q = _f32(r * fmt.max).to(torch.float64)
        sf = _f32(q / 2.0**margin)
    prev = previous.to(torch.float32).expand_as(sf)
    keep = ~(torch.isfinite(a) & (a > 0))
    sf = torch.where(keep, prev, sf)
    return torch.where(torch.isinf(sf), torch.full_like(sf, _F32_MAX), sf)


def _check_amax(a: Any) -> torch.Tensor:
    if isinstance(a, (int, float)):
        return torch.tensor(float(a), dtype=torch.float32)
    instance(a, torch.Tensor, "amax", "a float tensor or number")
    tensor(a, "amax", floating=True)
    if a.numel() != 1:
        raise ValueError(f"amax: expected one value, got shape {tuple(a.shape)}")
    return a.detach().reshape(()).to(torch.float32)


def _scale_or_keep(
    amax: torch.Tensor,
    previous: torch.Tensor,
    fmt: FloatFormat,
    margin: int = 0,
    pow2: bool = False,
    rule: ScaleRule = ScaleRule.TORCHAO,
) -> torch.Tensor:
    """A new scale from a positive finite amax, otherwise the previous scale (both rules)."""
    if rule == ScaleRule.TE:
        new = te_scale(amax, previous, fmt, margin)
        return round_down_to_pow2(new) if pow2 else new
    new = amax_to_scale(amax, fmt, margin=margin, pow2=pow2)
    good = torch.isfinite(amax) & (amax > 0)
    return torch.where(good, new, previous)


class DelayedScaling:
    """TransformerEngine-style delayed scaling for one tensor.

    Use: ``scale = ds.scale`` to quantize at this step, then ``ds.update(amax_of_this_step)``.
    ``interval`` recomputes the scale every ``interval`` updates (TE's former ``interval``);
    the history is recorded at every update. ``rule``: ``te`` (default) or ``torchao`` (module
    docstring); ``pow2`` rounds the scale down to a power of two after either rule.
    """

    def __init__(
        self,
        fmt: str | FloatFormat = E4M3FN,
        history_len: int = 16,
        algo: AmaxAlgo | str = AmaxAlgo.MAX,
        margin: int = 0,
        interval: int = 1,
        pow2: bool = False,
        rule: ScaleRule | str = ScaleRule.TE,
    ):
        self.fmt = get_format(fmt)
        positive_int(history_len, "history_len")
        algo = choice(algo, AmaxAlgo, "algo")
        integer(margin, "margin")
        positive_int(interval, "interval")
        boolean(pow2, "pow2")
        self.rule = choice(rule, ScaleRule, "rule")
        self.history_len, self.algo, self.margin, self.interval, self.pow2 = history_len, algo, margin, interval, pow2
        self.amax_history = torch.zeros(history_len, dtype=torch.float32)  # [0] is the most recent
        self.scale = torch.ones((), dtype=torch.float32)
        self.steps = 0

    @property
    def scale_inv(self) -> torch.Tensor:
        return (1.0 / self.scale).to(torch.float32)

    def reduced_amax(self) -> torch.Tensor:
        if self.algo == AmaxAlgo.MAX:
            return self.amax_history.max()
        return self.amax_history[0]

    def update(self, amax: torch.Tensor | float) -> torch.Tensor:
        """Record this step's amax; recompute the scale (every ``interval`` updates). Returns it."""
        a = _check_amax(amax)
        self.amax_history = torch.roll(self.amax_history, 1)
        self.amax_history[0] = a
        self.steps += 1
        if self.steps % self.interval == 0:
            self.scale = _scale_or_keep(self.reduced_amax(), self.scale, self.fmt, self.margin, self.pow2, self.rule)
        return self.scale


class TensorMeta:
    """Scales for one weight and the activation and gradient that meet it (the delayed-scaling design's form).

    ``w_scale``: from the max of a ring buffer of the last ``window`` weight amaxes, refreshed
    by ``refresh()`` (called every ``update_interval`` steps by ``Fp8State.step``).
    ``x_scale`` / ``g_scale``: delayed one call (``update_x`` / ``update_g`` after each use).
    The history starts at ones and every scale at 1, as in that design.
    """

    def __init__(self, window: int = 16, fmt: FloatFormat = E4M3FN, grad_fmt: FloatFormat = E4M3FN):
        self.fmt, self.grad_fmt = get_format(fmt), get_format(grad_fmt)
        self.amax_history = torch.ones(window, dtype=torch.float32)
        self.idx = 0
        self.w_scale = torch.ones((), dtype=torch.float32)
        self.x_scale = torch.ones((), dtype=torch.float32)
        self.g_scale = torch.ones((), dtype=torch.float32)

    def record(self, amax_w: torch.Tensor | float) -> None:
        self.amax_history[self.idx] = _check_amax(amax_w)
        self.idx = (self.idx + 1) % self.amax_history.numel()

    def refresh(self) -> None:
        self.w_scale = _scale_or_keep(self.amax_history.max(), self.w_scale, self.fmt)

    def update_x(self, amax_x: torch.Tensor | float) -> None:
        self.x_scale = _scale_or_keep(_check_amax(amax_x), self.x_scale, self.fmt)

    def update_g(self, amax_g: torch.Tensor | float) -> None:
        self.g_scale = _scale_or_keep(_check_amax(amax_g), self.g_scale, self.grad_fmt)


class Fp8State:
    """The delayed-scaling design's global state: enabled flag, step counter, metas keyed by weight identity."""

    def __init__(self, update_interval: int = 16, fmt: FloatFormat = E4M3FN, grad_fmt: FloatFormat = E4M3FN):
        positive_int(update_interval, "update_interval")
        self.update_interval = update_interval
        self.fmt, self.grad_fmt = get_format(fmt), get_format(grad_fmt)
        self.enabled = False
        self.step_count = 0
        self.metas: dict[tuple, TensorMeta] = {}

    @staticmethod
    def key(w: torch.Tensor) -> tuple:
        return (w.data_ptr(), tuple(w.shape), w.dtype)

    def meta_for(self, w: torch.Tensor) -> TensorMeta:
        k = self.key(w)
        if k not in self.metas:
            self.metas[k] = TensorMeta(self.update_interval, self.fmt, self.grad_fmt)
        return self.metas[k]

    def step(self) -> None:
        """One training step: every ``update_interval`` steps, refresh every weight scale."""
        self.step_count += 1
        if self.step_count % self.update_interval == 0:
            for meta in self.metas.values():
                meta.refresh()

    def reset(self) -> None:
        self.enabled = False
        self.step_count = 0
        self.metas.clear()
