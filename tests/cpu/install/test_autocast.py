"""torchao's Float8Linear (each recipe) under ``torch.autocast("cpu", bfloat16 / float16)``: the
output must be fp8ref's reference layer fed the input in float32 or in the autocast dtype, rounded
once to the dtype returned (fp8ref.harness.state.autocast). Which of the two, and which dtype comes out,
is implementation-defined: pinned as ``torchao.autocast.cpu.<dtype>.<recipe>``."""

import pytest
import torch

from fp8ref.harness.ao.torchao_compat import torchao_float8_linear
from fp8ref.harness.stack import probes
from fp8ref.harness.state.autocast import autocast_answer, autocast_inputs
from fp8ref.reference.recipes import TORCHAO_RECIPES

pytestmark = pytest.mark.needs("torchao")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_float8linear_under_autocast_is_the_reference_fed_one_dtype(recipe, dtype, skip_if_refused, record_observation):
    skip_if_refused(probes.torchao_recipe_refusal(recipe), f"torchao's {recipe} Float8Linear on cpu")
    answer = autocast_answer(torchao_float8_linear(recipe), recipe, dtype)
    lin, x = autocast_inputs()
    with torch.autocast("cpu", dtype=dtype):
        plain = lin(x).dtype
    record_observation(f"torchao {recipe} Float8Linear under cpu autocast {dtype}", f"{answer} (nn.Linear: {plain})")
    assert not answer.startswith("other"), answer
