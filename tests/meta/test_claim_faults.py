"""The claims adapter (``fp8ref.harness.claims``) against wrong team code: a quantize kernel that
rounds through float16 before float8 (double rounding) and a delayed-scaling update that reads the
amax history before recording this step's amax (one step late). Each must fail, naming the case
and what differs: the midpoints and the codes for the first; for the second, the step and the
scale (it is late from its first step, so every case fails there, the spike's among them)."""

from __future__ import annotations

import torch

from fp8ref.harness.claims import CastClaim, DelayedScalingClaim, check_cast_claim, check_delayed_scaling_claim
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


def float16_kernel_caught() -> bool:
    return {ABOVE, BELOW} <= {r.case for r in failed(check_cast_claim(through_float16, CastClaim()))}


def late_update_caught() -> bool:
    return SPIKE in {r.case for r in failed(check_delayed_scaling_claim(LateDelayedScaling, DelayedScalingClaim()))}


def test_a_kernel_that_rounds_through_float16_fails_the_midpoint_cases_naming_the_code():
    results = {r.case: r for r in check_cast_claim(through_float16, CastClaim())}
    for case in (ABOVE, BELOW):
        problem = results[case].problem
        assert problem is not None and problem.startswith("its codes (with its own scale): "), problem
        assert "got 0x" in problem and "want 0x" in problem, problem
    assert results["every finite code, scale 1"].problem is None  # (codes themselves survive float16)
    assert results["exactly at a midpoint (ties to the even code)"].problem is None  # (so do exact ties)


def test_an_update_that_reads_the_history_first_fails_naming_the_case_and_the_step():
    results = {r.case: r for r in check_delayed_scaling_claim(LateDelayedScaling, DelayedScalingClaim())}
    problem = results[SPIKE].problem
    assert problem is not None and problem.startswith("after step 1 (amaxes 1.0): got scale 1.0, want 448.0"), problem
    assert late_update_caught() and float16_kernel_caught()
