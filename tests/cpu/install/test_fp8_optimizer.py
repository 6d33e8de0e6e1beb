"""torchao's AdamW with FP8 state (``torchao.optim.AdamWFp8``), where it runs on this CPU: the
state's quantization against fp8ref.reference.optim_state (block size, scale value and dtype,
rounding), and a few optimizer steps against float32 AdamW whose moments are stored through that
state (the state codes and the parameter after every step). Its distance from plain float32 AdamW
is recorded, not asserted: Adam's step-size bound holds for any two Adam runs, a broken FP8 state
included. The step is compiled by torchao (seconds on a CPU): that test runs with --fp8-slow."""

import pytest
import torch

from fp8ref.harness.state.fp8_optimizer import (
    LR,
    adamw_fp8,
    adamw_fp8_step_refusal,
    check_state_quantization,
    check_steps,
    float32_adamw_gap,
    step_inputs,
)

pytestmark = pytest.mark.needs("torchao")


def _fp8_state(x: torch.Tensor) -> torch.Tensor:
    from torchao.optim.subclass_fp8 import OptimStateFp8

    state = OptimStateFp8.zeros(x.shape, 256)
    state.copy_(x)
    return state


def test_fp8_optimizer_state_is_the_reference_quantization():
    from torchao.optim import AdamWFp8

    assert AdamWFp8([torch.nn.Parameter(torch.zeros(4))]).block_size == 256  # the documented default
    problem = check_state_quantization(_fp8_state)
    assert problem is None, problem
    assert _fp8_state(torch.ones(512)).scale.dtype == torch.float32


@pytest.mark.slow
def test_adamw_fp8_steps_are_adamw_on_the_reference_state(skip_if_refused, record_observation):
    """Each step's state codes and block scales, and the parameter, against the reference AdamW
    whose moments go through fp8ref's FP8 state (fp8ref/harness/state/fp8_optimizer.py). The gap to plain
    float32 AdamW is recorded beside it (what the FP8 state costs)."""
    skip_if_refused(adamw_fp8_step_refusal(), "torchao's AdamWFp8 step on cpu")
    problem = check_steps(adamw_fp8)
    assert problem is None, problem
    gap = float32_adamw_gap(adamw_fp8)
    record_observation(
        f"AdamWFp8 vs float32 AdamW after {len(step_inputs()[1])} steps", f"max |dp| {gap:.3e} (lr {LR})"
    )
