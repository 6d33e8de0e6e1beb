"""Scales, recipes and delayed scaling: a missing eps clamp, a scale one ulp off, power-of-two
rounding up, axiswise amax on the wrong dim; E4M3 gradients where the recipe says E5M2; delayed
scaling on the latest amax instead of the window's max.

Deliberately broken stand-ins run through the same checks the suite holds torch and torchao to;
each must be reported (a fault that passes means a check went blind). ``test_catch_rate.py`` runs
every family again for the catch rate printed at the end of the run."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.ao.scales_and_recipes import recipe_table_diffs, scale_inputs, scale_mismatch
from fp8ref.harness.oracles.delayed_scaling import delayed_mismatch
from fp8ref.reference.delayed import DelayedScaling
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.recipes import RECIPES
from fp8ref.reference.scaling import EPS, amax, axiswise, compute_scale, round_down_to_pow2, tensorwise


# --- scales, through fp8ref/harness/ao/scales_and_recipes.scale_mismatch -----------------------------------
def _no_eps_clamp(x, fmt, g, pow2):
    s = (fmt.max / amax(x, g).double()).float()
    return round_down_to_pow2(s) if pow2 else s


def _one_ulp_up(x, fmt, g, pow2):
    return torch.nextafter(compute_scale(x, fmt, g, pow2=pow2), torch.tensor(float("inf")))


def _pow2_rounds_up(x, fmt, g, pow2):
    s = compute_scale(x, fmt, g, pow2=False)
    exact = round_down_to_pow2(s)
    return torch.where(exact == s, s, exact * 2) if pow2 else s


def _axiswise_wrong_dim(x, fmt, g, pow2):
    wrong = axiswise(0 if g.dim in (-1, x.dim() - 1) else -1)
    a = amax(x, wrong).amax().expand(amax(x, g).shape)  # one scale for every slice of the asked dim
    s = (fmt.max / a.double().clamp(min=EPS)).float()
    return round_down_to_pow2(s) if pow2 else s


SCALE_FAULTS = {
    "missing eps clamp": (_no_eps_clamp, axiswise(-1), False),
    "scale one ulp high": (_one_ulp_up, tensorwise(), False),
    "pow2 rounds up": (_pow2_rounds_up, axiswise(-1), True),
    "axiswise amax on the wrong dim": (_axiswise_wrong_dim, axiswise(-1), False),
}


def scale_fault_caught(fault: str) -> bool:
    fn, g, pow2 = SCALE_FAULTS[fault]
    return scale_mismatch(fn, scale_inputs(torch.float32), E4M3FN, g, pow2) is not None


@pytest.mark.parametrize("fault", list(SCALE_FAULTS))
def test_scale_fault_is_caught(fault):
    _, g, pow2 = SCALE_FAULTS[fault]
    assert (
        scale_mismatch(
            lambda x, f, gg, p: compute_scale(x, f, gg, pow2=p), scale_inputs(torch.float32), E4M3FN, g, pow2
        )
        is None
    )  # the check passes the reference itself
    assert scale_fault_caught(fault), f"scale_mismatch did not notice {fault}"


# --- the recipe table, through recipe_table_diffs -----------------------------------------------
def _e4m3_gradients(name):
    table = RECIPES[name].describe()
    return {k: v.replace("e5m2", "e4m3fn") if isinstance(v, str) else v for k, v in table.items()}


def recipe_fault_caught() -> bool:
    return any("grad_input.a" in d for d in recipe_table_diffs(_e4m3_gradients, ("tensorwise",)))


def test_e4m3_gradients_in_the_recipe_table_are_caught():
    assert recipe_table_diffs(lambda n: RECIPES[n].describe(), ("tensorwise",)) == []
    assert recipe_fault_caught()


# --- delayed scaling, through delayed_mismatch --------------------------------------------------
class LatestAmaxDelayedScaling(DelayedScaling):
    """Asked for the window's max, uses the latest amax."""

    def reduced_amax(self):
        return self.amax_history[0]


AMAXES = [1.0, 3.0, 250.0, 2.0, 2.5, 1.5]


def delayed_fault_caught() -> bool:
    return delayed_mismatch(lambda: LatestAmaxDelayedScaling(E4M3FN, 4, "max"), AMAXES, E4M3FN, 4, "max") is not None


def test_delayed_scaling_on_the_latest_amax_is_caught():
    assert delayed_mismatch(lambda: DelayedScaling(E4M3FN, 4, "max"), AMAXES, E4M3FN, 4, "max") is None
    assert delayed_fault_caught()
