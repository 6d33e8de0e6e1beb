"""torchao's MX and NVFP4 linear layers on the CUDA device (or the CPU under --fp8-dry-run), each
GEMM kernel preference and NVFP4 layout torchao offers there held to the reference: the CUDA twin
of tests/cpu/install/test_mx_linear.py, plus what only a GPU runs (KernelPreference.AUTO's MX
GEMM through torch._scaled_mm, NVFP4's Triton quantize kernel, the NVFP4 linear with activation
quantization). A path this device refuses skips, naming the refusal."""

import pytest

from fp8ref.reference.formats import E2M1FN, E4M3FN
from tests.common import mx_kernel_checks as mkc

pytestmark = pytest.mark.needs("torchao")

# (weight, activation) element formats AUTO's GEMMs take: MXFP8 and MXFP4
PAIRS = [(E4M3FN, E4M3FN), (E2M1FN, E2M1FN)]


@pytest.mark.parametrize("preference", ["EMULATED", "AUTO"])
@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("w_fmt,a_fmt", PAIRS, ids=[f"w{w.name}-a{a.name}" for w, a in PAIRS])
def test_mx_linear_matches_the_reference_gemm(w_fmt, a_fmt, mode, preference, gpu_device, skip_unless):
    refused, problem = mkc.check_mx_linear(gpu_device, w_fmt, a_fmt, mode, preference)
    skip_unless(refused, f"torchao's MX linear with KernelPreference.{preference} on {gpu_device}")
    assert problem is None, problem


@pytest.mark.parametrize("two_level", [False, True], ids=["one-level", "two-level"])
@pytest.mark.parametrize("layout", list(mkc.NVFP4_LAYOUTS))
def test_nvfp4_quantizes_alike_in_every_scale_layout(layout, two_level, gpu_device, skip_unless):
    refused, problem = mkc.check_nvfp4_layout(gpu_device, layout, two_level)
    skip_unless(refused, f"torchao's NVFP4 {layout} quantization on {gpu_device}")
    assert problem is None, problem


@pytest.mark.parametrize("dynamic_scale", [False, True], ids=["no-tensor-scale", "dynamic-tensor-scale"])
def test_nvfp4_linear_matches_the_reference_gemm(dynamic_scale, gpu_device, skip_unless):
    refused, problem = mkc.check_nvfp4_linear(gpu_device, dynamic_scale)
    skip_unless(refused, f"torchao's NVFP4 linear with activation quantization on {gpu_device}")
    assert problem is None, problem
