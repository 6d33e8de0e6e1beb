"""transformers' fine-grained FP8 (FP8 block checkpoints, DeepSeek-V3 / Qwen3-FP8 style) against
fp8ref's block reference (fp8ref/reference/block_fp8.py): the quantizer a checkpoint is saved with,
the loader ``from_pretrained(..., FineGrainedFP8Config(dequantize=True))`` reads it with, the
backward a LoRA step on a frozen FP8 layer takes, and a tiny Qwen3 checkpoint fp8ref writes itself
and transformers loads. Checks: fp8ref/harness/hf/block_checks.py and block_checkpoint.py.

Where transformers deviates from the definition it is excused for its exact answer only, named
with its versions (fp8ref/harness/casts/deviations.py, BLOCK_FP8_DEVIATIONS), and pinned
(``transformers.fp8.*``). Why a test may fail: a transformers release changes a scale, a block
layout or a rounding; a deviation's answer changes (then neither the definition's nor the
deviation's answer matches)."""

import pytest
import torch

from fp8ref.harness.hf import block_checkpoint, block_checks
from fp8ref.harness.hf.transformers_fp8 import finegrained_refusal
from fp8ref.harness.stack import install

pytestmark = pytest.mark.needs("transformers", "safetensors")

SCALE_FORMATS = ["float", "ue8m0"]
DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _finegrained(skip_if_refused):
    skip_if_refused(finegrained_refusal(), "transformers' fine-grained FP8")


def _record(check, what, record_observation, record_defect):
    for key, n in check.known_deviations.items():
        record_observation(f"transformers FP8 {what}: deviation {key}", f"{n} excused")
        record_defect(key, f"transformers {what}", n)
    assert not check.problems, f"{install.versions_line()}, {what}:\n" + "\n".join(check.problems[:6])


@pytest.mark.parametrize("scale_fmt", SCALE_FORMATS)
def test_fp8quantize_writes_the_references_codes_and_scales(scale_fmt, record_observation, record_defect):
    _record(block_checks.check_quantize(scale_fmt), f"Fp8Quantize {scale_fmt}", record_observation, record_defect)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scale_fmt", SCALE_FORMATS)
def test_the_loader_dequantizes_a_checkpoint_as_the_reference(scale_fmt, dtype, record_observation, record_defect):
    check = block_checks.check_loader(dtype, scale_fmt)
    for name, what in check.observed.items():
        if what != "definition":
            record_observation(f"transformers Fp8Dequantize {scale_fmt} {dtype} {name}", what)
    _record(check, f"Fp8Dequantize {scale_fmt} {dtype}", record_observation, record_defect)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scale_fmt", SCALE_FORMATS)
def test_the_backward_dequantizes_a_frozen_fp8_weight_as_the_reference(
    scale_fmt, dtype, record_observation, record_defect
):
    _record(
        block_checks.check_backward(dtype, scale_fmt),
        f"backward {scale_fmt} {dtype}",
        record_observation,
        record_defect,
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scale_fmt", SCALE_FORMATS)
def test_a_lora_step_input_gradient_through_a_frozen_fp8_layer(scale_fmt, dtype, record_observation, record_defect):
    _record(
        block_checks.check_lora_input_grad(dtype, scale_fmt),
        f"LoRA input grad {scale_fmt} {dtype}",
        record_observation,
        record_defect,
    )


@pytest.mark.needs("accelerate")  # (transformers loads an FP8 checkpoint only with it)
@pytest.mark.parametrize("scale_fmt", SCALE_FORMATS)
def test_a_block_checkpoint_loads_as_the_reference_dequantizes_it(
    scale_fmt, tmp_path, record_observation, record_defect
):
    """A one-layer Qwen3 whose MLP is 448 wide (ragged last blocks) written by fp8ref's quantizer,
    loaded by from_pretrained with FineGrainedFP8Config(dequantize=True) in bfloat16."""
    config, state = block_checkpoint.tiny_qwen3()
    quantized = block_checkpoint.write(tmp_path, config, state, scale_fmt)
    loaded = block_checkpoint.load(tmp_path).state_dict()
    _record(
        block_checkpoint.check_load(loaded, quantized),
        f"from_pretrained {scale_fmt}",
        record_observation,
        record_defect,
    )
