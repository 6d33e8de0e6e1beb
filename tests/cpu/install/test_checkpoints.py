"""FP8 state through checkpoints: float8 tensors of every dtype, torchao's quantized tensor
subclasses, and a model converted for float8 training resumed from a checkpoint.

Every way of keeping a tensor (fp8ref.harness.state.keeping: torch.save/load with the default loader,
copy_ into a tensor of the same kind, __tensor_flatten__/__tensor_unflatten__, load_state_dict,
safetensors for plain tensors) must give back every field bit for bit. Which ways the install
refuses is pinned (``checkpoint.<kind>.<way>``); torch.save/load and the flatten round trip, which
torch.compile and distributed checkpoints rely on, must not be refused."""

import pytest
import torch

from fp8ref.harness.stack import probes
from fp8ref.harness.state.keeping import subclass_examples
from fp8ref.harness.state.resume import check_resume, kept_problem, through_dcp
from fp8ref.reference.recipes import TORCHAO_RECIPES
from tests.common.params import TORCH_FORMATS

SUBCLASSES = ["mx_e4m3", "mx_e5m2", "mx_fp4", "mx_e4m3_swizzled", "nvfp4_single", "nvfp4_two_level"]
SUBCLASSES += ["float8_tensorwise", "float8_rowwise"]


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_every_code_of_a_float8_tensor_survives_every_checkpoint_path(fmt, skip_if_refused, record_observation):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"holds {fmt.name}")
    t = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(16, 16).view(fmt.torch_dtype())
    problem = kept_problem(t.t(), f"{fmt.name} tensor", record_observation)  # a transposed view: values, in order
    assert problem is None, problem


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("kind", SUBCLASSES)
def test_torchao_subclass_keeps_every_field_through_every_checkpoint_path(kind, record_observation):
    problem = kept_problem(subclass_examples()[kind](), f"torchao {kind}", record_observation)
    assert problem is None, problem


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_a_converted_model_resumes_bitwise_from_a_checkpoint(recipe, skip_if_refused):
    """Model and optimizer state saved after 3 of 6 AdamW steps and loaded into a freshly converted
    model (other initial weights): losses and final weights as the run that never stopped."""
    skip_if_refused(probes.torchao_recipe_refusal(recipe), f"torchao's {recipe} Float8Linear on cpu")
    problem = check_resume(recipe)
    assert problem is None, problem


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_a_converted_model_resumes_bitwise_from_a_distributed_checkpoint(recipe, skip_if_refused):
    """The same through torch.distributed.checkpoint (one process; two ranks:
    tests/cpu/install/test_fsdp_float8.py), loaded in place as a resumed run loads it."""
    skip_if_refused(probes.torchao_recipe_refusal(recipe), f"torchao's {recipe} Float8Linear on cpu")
    problem = check_resume(recipe, save=through_dcp)
    assert problem is None, problem
