"""transformers' FP8Linear forward (its Triton or DeepGEMM block-scaled GEMM) and FP8Experts (a
mixture-of-experts layer of FP8 experts) on the CUDA device, against fp8ref's block reference
(fp8ref/harness/hf/fp8_layer_forward.py: a derived bound; DeepGEMM's calc_diff for the two-GEMM experts). Under
--fp8-dry-run on the CPU the kernels refuse, and the test skips naming that; the quantizer, the
loader and the backward run on the CPU: tests/cpu/install/test_transformers_fp8.py."""

import pytest

from fp8ref.harness.hf.fp8_layer_forward import check_fp8experts_forward, check_fp8linear_forward
from fp8ref.harness.hf.transformers_fp8 import finegrained_refusal

pytestmark = pytest.mark.needs("transformers")


@pytest.mark.parametrize("scale_fmt", ["float", "ue8m0"])
def test_fp8linear_forward_matches_the_block_reference(scale_fmt, gpu_device, skip_if_refused):
    skip_if_refused(finegrained_refusal(), "transformers' fine-grained FP8")
    refused, problem = check_fp8linear_forward(gpu_device, scale_fmt)
    skip_if_refused(refused, f"transformers' FP8Linear forward on {gpu_device}")
    assert problem is None, problem


def test_fp8experts_forward_matches_the_block_reference(gpu_device, skip_if_refused):
    """A mixture-of-experts layer of FP8 experts (two of four per token) against the exact layer on
    the reference's dequantized weights (fp8ref/harness/hf/fp8_layer_forward.py says the bound)."""
    skip_if_refused(finegrained_refusal(), "transformers' fine-grained FP8")
    refused, problem = check_fp8experts_forward(gpu_device)
    skip_if_refused(refused, f"transformers' FP8Experts forward on {gpu_device}")
    assert problem is None, problem
