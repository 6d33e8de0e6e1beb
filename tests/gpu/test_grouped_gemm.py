"""The grouped GEMM checks of tests/cpu/install/test_grouped_gemm.py on the CUDA device (or the CPU
under --fp8-dry-run) where the GPU's test differs (torch's ``_grouped_mm`` runs on both from that
file, parametrized by device), and what only a GPU runs: torchao's MXFP8 grouped GEMM through its kernels
(KernelPreference.AUTO, sm100) and its FP8 rowwise grouped GEMM through torch._scaled_grouped_mm
(fp8ref/harness/gemm/grouped_bounds.py says the bounds). A path the device refuses skips, naming it."""

import pytest

from fp8ref.harness.gemm import grouped_bounds as gc


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("emulated", [True, False], ids=["emulated", "kernels"])
@pytest.mark.parametrize("groups", list(gc.GROUPS))
def test_torchao_mxfp8_grouped_mm_keeps_every_block_inside_one_expert(groups, emulated, gpu_device, skip_if_refused):
    refused, problem = gc.check_mxfp8_grouped_mm(gpu_device, groups, pad=True, emulated=emulated)
    skip_if_refused(refused, f"torchao's MXFP8 grouped GEMM ({'emulated' if emulated else 'kernels'}) on {gpu_device}")
    assert problem is None, problem


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("groups", list(gc.GROUPS))
def test_torchao_fp8_rowwise_grouped_mm_scales_per_expert(groups, gpu_device, skip_if_refused):
    refused, problem = gc.check_fp8_rowwise_grouped_mm(gpu_device, groups)
    skip_if_refused(refused, f"torchao's FP8 rowwise grouped GEMM on {gpu_device}")
    assert problem is None, problem
