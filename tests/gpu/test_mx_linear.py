"""torchao's MX and NVFP4 linear layers on the CUDA device (or the CPU under --fp8-dry-run), each
GEMM kernel preference torchao offers there held to the reference: the CUDA twin of
tests/cpu/install/test_mx_linear.py where the bodies differ, plus what only a GPU runs
(KernelPreference.AUTO's MX GEMM through torch._scaled_mm, the NVFP4 linear with activation
quantization). NVFP4's scale layouts and Triton quantize kernel run on CUDA from
tests/cpu/install/test_mx_linear.py, parametrized by device. A path this device refuses skips,
naming the refusal."""

import pytest

from fp8ref.harness.ao import mx_kernels as mkc
from fp8ref.reference.formats import E2M1FN, E4M3FN

pytestmark = pytest.mark.needs("torchao")

# (weight, activation) element formats AUTO's GEMMs take: MXFP8 and MXFP4
PAIRS = [(E4M3FN, E4M3FN), (E2M1FN, E2M1FN)]


@pytest.mark.parametrize("preference", ["EMULATED", "AUTO"])
@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("w_fmt,a_fmt", PAIRS, ids=[f"w{w.name}-a{a.name}" for w, a in PAIRS])
def test_mx_linear_matches_the_reference_gemm(w_fmt, a_fmt, mode, preference, gpu_device, skip_if_refused):
    refused, problem = mkc.check_mx_linear(gpu_device, w_fmt, a_fmt, mode, preference)
    skip_if_refused(refused, f"torchao's MX linear with KernelPreference.{preference} on {gpu_device}")
    assert problem is None, problem


@pytest.mark.parametrize("dynamic_scale", [False, True], ids=["no-tensor-scale", "dynamic-tensor-scale"])
def test_nvfp4_linear_matches_the_reference_gemm(dynamic_scale, gpu_device, skip_if_refused):
    refused, problem = mkc.check_nvfp4_linear(gpu_device, dynamic_scale)
    skip_if_refused(refused, f"torchao's NVFP4 linear with activation quantization on {gpu_device}")
    assert problem is None, problem
