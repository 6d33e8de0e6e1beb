"""The CUDA twin of tests/cpu/install/test_autocast.py: torchao's Float8Linear under CUDA autocast
(bfloat16) against fp8ref's layer fed the input in float32 or in the autocast dtype
(fp8ref.harness.state.autocast). On CUDA torchao's forward reads the GPU autocast state, so the answer
may differ from the CPU's; it is recorded, and pinned in the CUDA profile."""

import pytest
import torch

from fp8ref.harness.ao.torchao_compat import torchao_float8_linear
from fp8ref.harness.state.autocast import autocast_answer
from fp8ref.reference.recipes import TORCHAO_RECIPES

pytestmark = pytest.mark.needs("torchao")


@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_device_float8linear_under_autocast_is_the_reference_fed_one_dtype(recipe, gpu_device, record_observation):
    answer = autocast_answer(torchao_float8_linear(recipe), recipe, torch.bfloat16, gpu_device)
    record_observation(f"torchao {recipe} Float8Linear under {gpu_device} autocast bfloat16", answer)
    assert not answer.startswith("other"), answer
