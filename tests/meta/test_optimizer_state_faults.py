"""FP8 optimizer state: a state kept as E5M2 codes, one scaled by E5M2's max instead of E4M3's,
one whose all-zero block divides by zero; through ``check_state_quantization``, which
tests/cpu/install/test_fp8_optimizer.py holds torchao's OptimStateFp8 to. And the optimizer
step: an AdamW stand-in whose FP8 state holds all-zero codes (it moves the parameter by an Adam
step all the same: within Adam's step-size bound of float32 AdamW, at 20 times the right gap),
one that keeps float32 moments and only writes the codes, one without bias correction; through
``check_steps``, which the same test module holds torchao's AdamWFp8 to."""

from types import SimpleNamespace

import pytest
import torch

from fp8ref.harness.state.fp8_optimizer import (
    BETAS,
    EPS,
    LR,
    WD,
    check_state_quantization,
    check_steps,
    float32_adamw_gap,
)
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E5M2, FloatFormat
from fp8ref.reference.optim_state import dequantize_state, quantize_state


def _state(codes: torch.Tensor, scale: torch.Tensor, fmt: FloatFormat = E4M3FN) -> SimpleNamespace:
    def read() -> torch.Tensor:
        return (decode(codes, fmt).float().reshape(scale.numel(), -1) * scale[:, None]).reshape(codes.shape)

    return SimpleNamespace(codes=codes, scale=scale, block_size=codes.numel() // scale.numel(), dequantize=read)


def _kept(x: torch.Tensor, fmt: FloatFormat, top: float, floor: float) -> SimpleNamespace:
    blocks = x.reshape(-1, 256)
    scale = blocks.abs().amax(-1).clamp(min=floor) / torch.tensor(top)
    return _state(encode(blocks / scale[:, None], fmt, saturate=True).reshape(x.shape), scale, fmt)


FAULTS = {
    "state kept as E5M2": lambda x: _kept(x, E5M2, E5M2.max, 1e-12),
    "scale by E5M2's max": lambda x: _kept(x, E4M3FN, E5M2.max, 1e-12),
    "zero block divides by zero": lambda x: _kept(x, E4M3FN, E4M3FN.max, 0.0),
}


def state_fault_caught(fault: str) -> bool:
    return check_state_quantization(FAULTS[fault]) is not None


def test_the_reference_state_passes():
    def keep(x):
        codes, scale = quantize_state(x)
        state = _state(codes, scale)
        assert torch.equal(state.dequantize(), dequantize_state(codes, scale))
        return state

    assert check_state_quantization(keep) is None


@pytest.mark.parametrize("fault", list(FAULTS))
def test_optimizer_state_fault_is_caught(fault):
    assert state_fault_caught(fault), f"the optimizer state check did not notice: {fault}"


# --- the optimizer step, through check_steps ---------------------------------------------------------------


class _AdamWOnFp8State(torch.optim.Optimizer):
    """AdamW in float32 (torchao's order of operations, ``torchao/optim/adam.py``,
    ``single_param_adam``) whose moments are kept as fp8ref's FP8 state, with a ``fault``."""

    block_size = 256

    def __init__(self, params: list[torch.nn.Parameter], fault: str | None = None) -> None:
        super().__init__(params, {})
        self.fault = fault

    @torch.no_grad()
    def step(self, closure=None):
        b1, b2 = BETAS
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st.update(n=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                st["n"] += 1
                m_in, v_in = (
                    (st["m"], st["v"])
                    if self.fault == STEP_FAULTS[1]
                    else (_read(st, "exp_avg"), _read(st, "exp_avg_sq"))
                )
                p32 = p.float() - LR * WD * p.float()
                m32, v32 = m_in.lerp(p.grad, 1 - b1), v_in.lerp(p.grad.square(), 1 - b2)
                bc1, bc2 = 1 - b1 ** st["n"], torch.tensor(1 - b2 ** st["n"])
                if self.fault == STEP_FAULTS[2]:
                    bc1, bc2 = 1.0, torch.tensor(1.0)
                p.copy_(p32 - LR * (m32 / bc1) / (v32.sqrt() / bc2.sqrt() + EPS))
                st["m"], st["v"] = m32, v32
                for name, x in (("exp_avg", m32), ("exp_avg_sq", v32)):
                    codes, scale = quantize_state(x, self.block_size)
                    if self.fault == STEP_FAULTS[0]:
                        codes = torch.zeros_like(codes)
                    st[name] = _state(codes, scale)


def _read(st: dict, name: str) -> torch.Tensor:
    return st[name].dequantize() if name in st else torch.zeros_like(st["m"])


STEP_FAULTS = (
    "the FP8 state holds all-zero codes",
    "float32 moments kept, the FP8 state written but never read",
    "no bias correction",
)


def step_fault_caught(fault: str) -> bool:
    return check_steps(lambda ps: _AdamWOnFp8State(ps, fault)) is not None


def test_the_reference_optimizer_passes_the_step_check():
    assert check_steps(lambda ps: _AdamWOnFp8State(ps)) is None


def test_zero_codes_stay_within_adams_step_bound_of_float32_adamw():
    """Why the step check does not use Adam's step bound: the zero-codes state is within it."""
    right, zero = (float32_adamw_gap(lambda ps, f=f: _AdamWOnFp8State(ps, f)) for f in (None, STEP_FAULTS[0]))
    bound = 2 * 3 * LR * max(1.0, (1 - BETAS[0]) / (1 - BETAS[1]) ** 0.5)  # Kingma & Ba 2.1, 3 steps, two runs
    assert right < zero <= bound, (right, zero, bound)


@pytest.mark.parametrize("fault", STEP_FAULTS)
def test_optimizer_step_fault_is_caught(fault):
    assert step_fault_caught(fault), f"the optimizer step check did not notice: {fault}"
