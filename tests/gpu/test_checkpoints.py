"""The CUDA twin of tests/cpu/install/test_checkpoints.py: float8 tensors and torchao's quantized
subclasses held on the device through every way of keeping them (fp8ref.harness.state.keeping)."""

import pytest
import torch

from fp8ref.harness.stack import probes
from fp8ref.harness.state.keeping import subclass_examples
from fp8ref.harness.state.resume import kept_problem
from tests.common.params import TORCH_FORMATS


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_device_float8_tensor_survives_every_checkpoint_path(fmt, gpu_device, skip_if_refused, record_observation):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"holds {fmt.name}")
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(gpu_device)
    problem = kept_problem(codes.view(fmt.torch_dtype()), f"{fmt.name} tensor on {gpu_device}", record_observation)
    assert problem is None, problem


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("kind", ["mx_e4m3", "mx_fp4", "nvfp4_two_level", "float8_tensorwise"])
def test_device_torchao_subclass_keeps_every_field(kind, gpu_device, record_observation):
    problem = kept_problem(subclass_examples(gpu_device)[kind](), f"torchao {kind} on {gpu_device}", record_observation)
    assert problem is None, problem
