"""Mixture-of-experts grouped GEMMs against fp8ref's reference (fp8ref/reference/grouped.py),
forward, input gradient and weight gradient: torch's bfloat16 ``_grouped_mm`` and torchao's MXFP8
grouped GEMM (its emulated path, which runs on the CPU), on groups with an empty expert, a group
not a multiple of 16 or 32 and a last group ending the tensor (fp8ref/harness/gemm/grouped_bounds.py).
torch's ``_grouped_mm`` also on CUDA (parametrized by device); the FP8 rowwise grouped GEMM
(``_scaled_grouped_mm``) and MXFP8 through its kernels are CUDA only: tests/gpu/test_grouped_gemm.py.

Why a test may fail: a release multiplies a token by another expert's weight, shares an MX block
(and so a scale) between two experts, or reads the group offsets one row off. What an install
refuses (torchao's MXFP8 weight gradient of a group that is not a multiple of 32 unless the groups
are padded) skips, naming it, and is pinned (``grouped.*``)."""

import pytest

from fp8ref.harness.gemm import grouped_bounds as gc
from tests.common.params import on_devices


@on_devices()
@pytest.mark.parametrize("groups", list(gc.GROUPS))
def test_torch_grouped_mm_multiplies_each_group_by_its_expert(groups, device, skip_if_refused):
    refused, problem = gc.check_grouped_mm(device, groups)
    skip_if_refused(refused, f"torch._grouped_mm on {device}")
    assert problem is None, problem


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("pad", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("groups", list(gc.GROUPS))
def test_torchao_mxfp8_grouped_mm_keeps_every_block_inside_one_expert(groups, pad, skip_if_refused):
    refused, problem = gc.check_mxfp8_grouped_mm("cpu", groups, pad)
    skip_if_refused(refused, f"torchao's emulated MXFP8 grouped GEMM ({groups} groups, pad={pad}) on cpu")
    assert problem is None, problem
