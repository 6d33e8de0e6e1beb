"""The module check of the shipped seed-style FP8 modules and of torchao's Float8Linear: examples
of ``ModuleCheck`` (docs/twin.md) and fp8ref's own proof that correct FP8 modules pass.

- ``static_custom_op``: the workload ``static_custom_op``'s ``StaticFp8Linear`` (a custom op
  around ``_scaled_mm``, static scales, a cached float8 weight re-quantized after each step);
- ``delayed_scaling``: the workload ``delayed_scaling``'s autograd function as a module, its
  16-step amax histories kept in its ``state_dict`` (TransformerEngine keeps them as extra state);
- ``float8_linear(recipe)``: torchao's ``Float8Linear`` (``tensorwise``, ``rowwise``), emulated
  where this install refuses its ``_scaled_mm`` (``fp8ref.harness.stack.refusals``)."""

from __future__ import annotations

import copy
from typing import Any

import torch

from .bounds import Operand, Scaling
from .check import ModuleCheck, Recipe

__all__ = ["mlp", "linear_twin", "static_custom_op", "delayed_scaling", "float8_linear", "EXAMPLES"]

DIMS = (32, 32, 16)


def mlp(seed: int, dims: tuple[int, ...] = DIMS) -> torch.nn.Sequential:
    """Bias-free float32 Linears between ``dims``, ReLU between, weights from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
        layers += [torch.nn.ReLU()] if i else []
        linear = torch.nn.Linear(fan_in, fan_out, bias=False)
        with torch.no_grad():
            linear.weight.copy_((torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * fan_in**-0.5)
        layers.append(linear)
    return torch.nn.Sequential(*layers)


def linear_twin(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` with each submodule that holds a 2-D ``weight`` and no children (an FP8 linear
    of any make, torchao's Float8Linear too) replaced by an ``nn.Linear`` of its shape: the twin
    a converter gives. The check gives it the FP8 module's parameters."""
    for name, child in list(module.named_children()):
        w = getattr(child, "weight", None)
        if isinstance(w, torch.Tensor) and w.dim() == 2 and not list(child.children()):
            bias = getattr(child, "bias", None)
            setattr(module, name, torch.nn.Linear(w.shape[1], w.shape[0], bias=isinstance(bias, torch.Tensor)))
        else:
            linear_twin(child)
    return module


# --- the custom op with static scales (seed 002's shape) ---------------------------------------


def _static(seed: int) -> torch.nn.Module:
    from ..workloads.static_custom_op import StaticFp8Linear

    model = mlp(seed)
    for i, layer in enumerate(model):
        if isinstance(layer, torch.nn.Linear):
            model[i] = StaticFp8Linear(layer)
    return model


def _requantize(model: torch.nn.Module) -> None:
    for layer in model.modules():
        requantize = getattr(layer, "requantize", None)
        if callable(requantize):
            requantize()


def static_custom_op() -> ModuleCheck:
    from ..workloads.static_custom_op import G_S, W_S, X_S

    # the workload's scales are divisors; a Scaling's the value the cast multiplies by
    recipe = Recipe.of("static", x=1 / X_S, w=1 / W_S, g=1 / G_S)
    return ModuleCheck(
        "static_custom_op", _static, linear_twin, recipe, after_step=_requantize, output_gradient=2.0**-10
    )


# --- delayed scaling (seed 003's shape) --------------------------------------------------------


class DelayedFp8Linear(torch.nn.Module):
    """A bias-free Linear through the workload ``delayed_scaling``'s FP8 autograd function, its
    input's, weight's and output gradient's amax histories its own, saved in its state_dict."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        from ..workloads.delayed_scaling import _Meta

        super().__init__()
        self.weight = linear.weight
        self.meta = _Meta()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from ..workloads.delayed_scaling import _Fp8Linear

        shape = x.shape
        return _Fp8Linear.apply(x.reshape(-1, shape[-1]), self.weight, self.meta).reshape(*shape[:-1], -1)

    def get_extra_state(self) -> Any:
        return copy.deepcopy(self.meta)

    def set_extra_state(self, state: Any) -> None:
        self.meta = copy.deepcopy(state)


def _delayed(seed: int) -> torch.nn.Module:
    model = mlp(seed)
    for i, layer in enumerate(model):
        if isinstance(layer, torch.nn.Linear):
            model[i] = DelayedFp8Linear(layer)
    return model


def delayed_scaling() -> ModuleCheck:
    from ..workloads.delayed_scaling import HISTORY

    delayed = Scaling("delayed", history_len=HISTORY)
    recipe = Recipe(Operand("e4m3fn", delayed), Operand("e4m3fn", delayed), Operand("e5m2", delayed))
    return ModuleCheck("delayed_scaling", _delayed, linear_twin, recipe)


# --- torchao's Float8Linear --------------------------------------------------------------------


def _float8(recipe: str, emulate: bool) -> Any:
    def make(seed: int) -> torch.nn.Module:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        config = Float8LinearConfig.from_recipe_name(recipe)
        if emulate:
            import dataclasses

            config = dataclasses.replace(config, emulate=True)
        return convert_to_float8_training(mlp(seed), config=config)

    return make


def float8_linear(recipe: str = "tensorwise") -> ModuleCheck:
    """torchao's Float8Linear in ``recipe``, its formats read from torchao's config; emulated
    (``emulate=True``) where this install refuses the real one's ``_scaled_mm`` on the CPU."""
    from torchao.float8 import Float8LinearConfig

    from ..stack.refusals import is_refusal

    config = Float8LinearConfig.from_recipe_name(recipe)

    def fmt(cast: Any) -> str:
        return {torch.float8_e4m3fn: "e4m3fn", torch.float8_e5m2: "e5m2"}[cast.target_dtype]

    dynamic = Scaling("dynamic", pow2=bool(config.round_scales_to_power_of_2))
    declared = Recipe(
        Operand(fmt(config.cast_config_input), dynamic),
        Operand(fmt(config.cast_config_weight), dynamic),
        Operand(fmt(config.cast_config_grad_output), dynamic),
    )
    emulate = False
    try:
        m = _float8(recipe, False)(0)
        m(torch.randn(2, DIMS[0], requires_grad=True)).sum().backward()
    except Exception as exc:
        if not is_refusal(exc):
            raise
        emulate = True
    name = f"torchao Float8Linear {recipe}" + (" (emulated)" if emulate else "")
    return ModuleCheck(name, _float8(recipe, emulate), linear_twin, declared)


EXAMPLES = ("static_custom_op", "delayed_scaling", "float8_linear")
