"""Float8 layers under autocast: one that rounds its input to float16 whatever the autocast dtype
(the GPU default read on the CPU), one that rounds its output twice (through float16 to
bfloat16); through fp8ref.harness.state.autocast, which tests/cpu/install/test_autocast.py uses."""

import copy

import pytest
import torch

from fp8ref.harness.state.autocast import autocast_answer
from fp8ref.reference.emulate import Fp8Linear


class _Layer(torch.nn.Module):
    def __init__(self, lin: torch.nn.Linear, before: torch.dtype | None, after: list[torch.dtype]) -> None:
        super().__init__()
        self.inner = Fp8Linear.from_linear(copy.deepcopy(lin), "tensorwise")
        self.before, self.after = before, after

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            y = self.inner(x if self.before is None else x.to(self.before))
        for d in self.after:
            y = y.to(d)
        return y


FAULTS = {
    "input rounded to float16 under bfloat16 autocast": lambda lin: _Layer(lin, torch.float16, [torch.bfloat16]),
    "output rounded through float16 to bfloat16": lambda lin: _Layer(lin, None, [torch.float16, torch.bfloat16]),
}


def autocast_fault_caught(fault: str) -> bool:
    return autocast_answer(FAULTS[fault], "tensorwise", torch.bfloat16).startswith("other")


def test_a_layer_that_follows_one_answer_passes():
    answer = autocast_answer(lambda lin: _Layer(lin, None, [torch.bfloat16]), "tensorwise", torch.bfloat16)
    assert answer == "input from float32, output bfloat16"
    answer = autocast_answer(lambda lin: _Layer(lin, torch.bfloat16, []), "tensorwise", torch.bfloat16)
    assert answer == "input from bfloat16, output bfloat16"


@pytest.mark.parametrize("fault", list(FAULTS))
def test_autocast_fault_is_caught(fault):
    assert autocast_fault_caught(fault), f"the autocast check did not notice: {fault}"
