"""FP8 optimizer state: a state kept as E5M2 codes, one scaled by E5M2's max instead of E4M3's,
one whose all-zero block divides by zero; through ``check_state_quantization``, which
tests/cpu/install/test_fp8_optimizer.py holds torchao's OptimStateFp8 to."""

from types import SimpleNamespace

import pytest
import torch

from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E5M2, FloatFormat
from fp8ref.reference.optim_state import dequantize_state, quantize_state
from tests.common.optim_checks import check_state_quantization


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
