"""Deliberate changes to torchao's float8 training, benign and faulty, each a context manager
that patches torchao for the code inside it and restores it on exit.

They let the bf16-vs-FP8 parity verdict (``fp8ref.finetune.parity``) be checked the way it must
work: a *benign* change alters FP8's arithmetic without making it wrong (as a new torch may) and
must pass; a *fault* breaks FP8 the way a real regression would and must fail, or be stated as
undetectable by a loss comparison. Harness code: it patches torchao 0.17-0.18 internals by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..harness.stack.install import one_thread
from ..reference.validate import one_of

__all__ = ["PERTURBATIONS", "perturbation"]


@contextlib.contextmanager
def _patched(module: Any, name: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    orig = getattr(module, name)
    setattr(module, name, wrap(orig))
    try:
        yield
    finally:
        setattr(module, name, orig)


def _scale_patch(change):
    """torchao's amax -> scale, with ``change(scale, float8_dtype)`` applied to its result."""
    import torchao.float8.float8_utils as fu

    def wrap(orig):
        def amax_to_scale(amax, float8_dtype, round_scales_to_power_of_2=False):
            return change(orig(amax, float8_dtype, round_scales_to_power_of_2), float8_dtype)

        return amax_to_scale

    return _patched(fu, "amax_to_scale", wrap)


def one_ulp_up():
    """Every scale one float32 ulp larger (as multiplying by a reciprocal instead of dividing can)."""
    return _scale_patch(lambda s, dt: torch.nextafter(s, torch.full_like(s, math.inf)))


def weight_scale_doubled():
    """The weight's stored scale twice what it was cast with: dequantized weights at half value."""
    import torchao.float8.float8_linear as fl
    from torchao.float8.float8_training_tensor import GemmInputRole

    def wrap(orig):
        sig = inspect.signature(orig)

        def cast(*args, **kwargs):
            out = orig(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            if bound.arguments["gemm_input_role"] == GemmInputRole.WEIGHT:
                out._scale = out._scale * 2
            return out

        return cast

    return _patched(fl, "hp_tensor_to_float8_dynamic", wrap)


def gradient_scale_missing():
    """Gradients (E5M2) cast with scale 1: the small ones flush to zero."""
    return _scale_patch(lambda s, dt: torch.ones_like(s) if dt == torch.float8_e5m2 else s)


def scales_doubled():
    """Every scale twice the formula's: the top half of each tensor's range saturates."""
    return _scale_patch(lambda s, dt: s * 2)


def gradients_in_e4m3():
    """The recipe casts output gradients to E4M3 instead of E5M2 (both GEMMs that use them)."""
    import torchao.float8.config as cfg_mod

    def wrap(orig):
        def from_recipe_name(name):
            c = orig(name)
            e4 = dataclasses.replace(c.cast_config_grad_output, target_dtype=torch.float8_e4m3fn)
            return dataclasses.replace(c, cast_config_grad_output=e4, cast_config_grad_output_for_grad_weight=e4)

        return staticmethod(from_recipe_name)

    return _patched(cfg_mod.Float8LinearConfig, "from_recipe_name", lambda orig: wrap(orig))


PERTURBATIONS = {
    # name: (kind, context, what it is)
    "baseline": ("benign", contextlib.nullcontext, "this install as it is"),
    "scale-one-ulp": ("benign", one_ulp_up, "every scale one float32 ulp larger"),
    "one-thread": ("benign", one_thread, "torch.set_num_threads(1): another summation order"),
    "weight-scale-x2": ("fault", weight_scale_doubled, "weights dequantized at half their value (scale off by 2)"),
    "grad-scale-missing": ("fault", gradient_scale_missing, "E5M2 gradients cast without scaling"),
    "scales-x2": ("fault", scales_doubled, "every scale doubled: the top half of each range saturates"),
    "grads-e4m3": ("fault", gradients_in_e4m3, "output gradients cast to E4M3 instead of E5M2"),
}


def perturbation(name: str) -> contextlib.AbstractContextManager[None]:
    """The context manager for ``name`` (a key of ``PERTURBATIONS``)."""
    return PERTURBATIONS[one_of(name, sorted(PERTURBATIONS), "name")][1]()
