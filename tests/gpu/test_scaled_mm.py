"""The _scaled_mm argument checks of tests/common/scaled_mm_checks.py on the GPU (the CPU twin:
tests/cpu/install/test_scaled_mm.py): every out dtype with fast accumulation on and off, bias
under non-unit scales, rows not a multiple of the kernel's tile, compiled against exact, FP8
output with scale_result, and the accumulator width itself."""

import pytest
import torch

from tests.common import scaled_mm_checks as mm

pytestmark = pytest.mark.sm(89, "FP8 tensor cores")


@pytest.fixture
def mm_device(gpu_device: str) -> str:
    return gpu_device


@pytest.fixture
def ragged_m(gpu_device: str) -> tuple[int, ...]:
    """Row counts in the tail classes of kernels tiled in M: torch asks only K and N to be
    multiples of 16, so M = 1, 17, 100 and 4111 are legal (one row; not a multiple of 16; of 64
    or 128; one short of a multiple of 256), with 48, 272 and 4112 (multiples of 16 but not of
    256). The CPU dry run takes the small ones."""
    return (1, 17, 100) if gpu_device == "cpu" else (1, 17, 48, 100, 272, 4111, 4112)


@pytest.mark.parametrize("fast_accum", [False, True], ids=["exact-accum", "fast-accum"])
@pytest.mark.parametrize("out_dtype", mm.OUT_DTYPES, ids=str)
@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_every_out_dtype_matches_the_exact_product(scaling, out_dtype, fast_accum, mm_device, skip_unless):
    skip_unless(*mm.refusal(scaling, out_dtype, mm_device))
    problem = mm.check_every_out_dtype(mm_device, scaling, out_dtype, fast_accum)
    assert problem is None, problem


@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_bias_is_added_once_under_non_unit_scales(scaling, mm_device, skip_unless):
    skip_unless(*mm.refusal(scaling, torch.bfloat16, mm_device))
    problem = mm.check_bias_added_once(mm_device, scaling)
    assert problem is None, problem


@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_rows_not_a_multiple_of_the_tile(scaling, mm_device, ragged_m, skip_unless, record_observation):
    skip_unless(*mm.refusal(scaling, torch.bfloat16, mm_device))
    problem, kernels = mm.check_ragged_rows(mm_device, scaling, ragged_m)
    record_observation(f"_scaled_mm {scaling} kernels by M on {mm_device}", kernels)
    assert problem is None, problem


@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_compiled_scaled_mm_matches_the_exact_product(
    scaling, mm_device, skip_unless, record_observation, fresh_dynamo
):
    skip_unless(*mm.refusal(scaling, torch.bfloat16, mm_device))
    problem, seen = mm.check_compiled(mm_device, scaling)
    record_observation(f"torch.compile(_scaled_mm) {scaling} on {mm_device}", seen)
    assert problem is None, problem


@pytest.mark.parametrize("out_dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_fp8_output_applies_scale_result(out_dtype, mm_device, skip_unless, record_observation):
    skip_unless(*mm.refusal("tensorwise", out_dtype, mm_device))
    problem, rule = mm.check_scale_result(mm_device, out_dtype)
    record_observation(f"_scaled_mm scale_result with {out_dtype} output on {mm_device}", rule)
    assert problem is None, problem


def test_without_fast_accumulation_partial_sums_are_promoted_to_float32(mm_device, skip_unless, record_observation):
    skip_unless(*mm.refusal("tensorwise", torch.float32, mm_device))
    problem, seen = mm.check_promotion(mm_device)
    record_observation(f"_scaled_mm accumulator bits on {mm_device} (23 = float32's)", seen)
    assert problem is None, problem


def test_scale_forms_and_odd_shapes_give_right_results_where_accepted(mm_device, skip_unless, record_observation):
    skip_unless(*mm.refusal("tensorwise", torch.float32, mm_device))
    problem, seen = mm.check_scale_forms(mm_device)
    record_observation(f"_scaled_mm scale forms and shapes on {mm_device}", seen)
    assert problem is None, problem
