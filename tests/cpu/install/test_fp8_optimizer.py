"""torchao's AdamW with FP8 state (``torchao.optim.AdamWFp8``), where it runs on this CPU: the
state's quantization against fp8ref.reference.optim_state (block size, scale value and dtype,
rounding), a few optimizer steps against float32 AdamW whose moments are stored through that
state, and the same steps against plain float32 AdamW within Adam's step bound. The step is
compiled by torchao (seconds on a CPU): those two tests run with --fp8-slow."""

import pytest
import torch

from fp8ref.harness.stack.refusals import attempt
from tests.common.optim_checks import (
    BETAS,
    EPS,
    LR,
    WD,
    adam_step_bound,
    check_state_quantization,
    check_steps,
    step_inputs,
)

pytestmark = pytest.mark.needs("torchao")


def _adamw_fp8(params):
    from torchao.optim import AdamWFp8

    return AdamWFp8(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)


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
def test_adamw_fp8_steps_are_adamw_on_the_reference_state(record_observation):
    ok, problem = attempt(lambda: check_steps(_adamw_fp8))
    if not ok:
        record_observation("torchao AdamWFp8 step on cpu", problem)
        pytest.skip(f"torchao's AdamWFp8 step on cpu: {problem}")
    assert problem is None, problem


@pytest.mark.slow
def test_adamw_fp8_stays_within_adams_step_bound_of_float32_adamw(record_observation):
    p0, grads = step_inputs()
    runs = {}
    for name, make in (("fp8", _adamw_fp8), ("f32", lambda ps: torch.optim.AdamW(ps, LR, BETAS, EPS, WD))):
        p = torch.nn.Parameter(p0.clone())
        opt = make([p])
        for g in grads:
            p.grad = g.clone()
            ok, why = attempt(opt.step)
            if not ok:
                pytest.skip(f"torchao's AdamWFp8 step on cpu: {why}")
        runs[name] = p.detach()
    gap = (runs["fp8"] - runs["f32"]).abs().max().item()
    record_observation(f"AdamWFp8 vs float32 AdamW after {len(grads)} steps", f"max |dp| {gap:.3e} (lr {LR})")
    assert 0 < gap <= adam_step_bound(len(grads)), gap
