"""The claims adapter (``fp8ref.harness.claims``) against wrong team code: a quantize kernel that
rounds through float16 before float8 (double rounding) and a delayed-scaling update that reads the
amax history before recording this step's amax (one step late). Each must fail, naming the case
and what differs: the midpoints and the codes for the first; for the second, the step and the
scale (it is late from its first step, so every case fails there, the spike's among them).
Two faults only the inputs hypothesis generates reach, each passing every named case: a kernel
whose scale is off for an amax above 1e30, and an update that lets a tiny amax give an infinite
scale (TransformerEngine clamps it to float32's max); each result names the input, made small."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.claims import (
    CastClaim,
    ClaimResult,
    DelayedScalingClaim,
    check_cast_claim,
    check_delayed_scaling_claim,
)
from fp8ref.harness.claims import failures as failed
from tests.cpu.tools.test_claims import TeamDelayedScaling, team_quantize

ABOVE = "just above a midpoint between neighbouring codes (rounds up, once)"
BELOW = "just below a midpoint between neighbouring codes (rounds down)"
SPIKE = "a spike: the scale drops at the step that records it"


def through_float16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _, scale = team_quantize()(x)
    return (x * scale).clamp(-448, 448).to(torch.float16).to(torch.float8_e4m3fn), scale


class LateDelayedScaling(TeamDelayedScaling):
    """Scales from the history before this step's amax is in it."""

    def update(self, amax: torch.Tensor) -> torch.Tensor:
        top = self.history.max()
        if torch.isfinite(top) and top > 0:
            self.scale = top.reciprocal() * self.fp8_max
        self.history = torch.roll(self.history, 1)
        self.history[0] = amax
        return self.scale


def scale_off_above_1e30(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    codes, scale = team_quantize()(x)
    return codes, scale * 2 if x.abs().amax() > 1e30 else scale


class UnclampedDelayedScaling(TeamDelayedScaling):
    """TE's rule without its clamp: 1 / amax overflows to an infinite scale for a tiny amax."""

    @staticmethod
    def clamped(scale: torch.Tensor) -> torch.Tensor:
        return scale


def _generated(results: list[ClaimResult]) -> tuple[list[ClaimResult], ClaimResult]:
    named = [r for r in results if not r.case.startswith("hypothesis-generated inputs")]
    (generated,) = [r for r in results if r.case.startswith("hypothesis-generated inputs")]
    return named, generated


@pytest.mark.needs("hypothesis")
def test_a_scale_off_for_huge_inputs_passes_the_named_cases_and_fails_the_generated_ones_naming_the_input():
    named, generated = _generated(check_cast_claim(scale_off_above_1e30, CastClaim()))
    assert not failed(named)
    assert generated.problem is not None and generated.problem.startswith("its scale: "), generated.problem
    assert "the input, shrunk: 1x16, zero but {" in generated.problem, generated.problem
    assert len(generated.problem.split("zero but {", 1)[1].split(", [")) == 1, generated.problem  # one value left


@pytest.mark.needs("hypothesis")
def test_an_update_without_te_s_clamp_passes_the_named_cases_and_fails_the_generated_ones_naming_the_amax():
    named, generated = _generated(check_delayed_scaling_claim(UnclampedDelayedScaling, DelayedScalingClaim()))
    assert not failed(named)
    problem = generated.problem
    assert problem is not None and problem.startswith("after step 1 (amaxes "), problem
    assert problem.endswith("): got scale inf, want 3.4028234663852886e+38"), problem


def generated_inputs_caught() -> bool:
    faults = [
        check_cast_claim(scale_off_above_1e30, CastClaim()),
        check_delayed_scaling_claim(UnclampedDelayedScaling, DelayedScalingClaim()),
    ]
    return all(_generated(results)[1].failed for results in faults)


def float16_kernel_caught() -> bool:
    return {ABOVE, BELOW} <= {r.case for r in failed(check_cast_claim(through_float16, CastClaim(), examples=0))}


def late_update_caught() -> bool:
    late = check_delayed_scaling_claim(LateDelayedScaling, DelayedScalingClaim(), examples=0)
    return SPIKE in {r.case for r in failed(late)}


def test_a_kernel_that_rounds_through_float16_fails_the_midpoint_cases_naming_the_code():
    results = {r.case: r for r in check_cast_claim(through_float16, CastClaim(), examples=0)}
    for case in (ABOVE, BELOW):
        problem = results[case].problem
        assert problem is not None and problem.startswith("its codes (with its own scale): "), problem
        assert "got 0x" in problem and "want 0x" in problem, problem
    assert results["every finite code, scale 1"].problem is None  # (codes themselves survive float16)
    assert results["exactly at a midpoint (ties to the even code)"].problem is None  # (so do exact ties)


def test_an_update_that_reads_the_history_first_fails_naming_the_case_and_the_step():
    results = {r.case: r for r in check_delayed_scaling_claim(LateDelayedScaling, DelayedScalingClaim(), examples=0)}
    problem = results[SPIKE].problem
    assert problem is not None and problem.startswith("after step 1 (amaxes 1.0): got scale 1.0, want 448.0"), problem
    assert late_update_caught() and float16_kernel_caught()
