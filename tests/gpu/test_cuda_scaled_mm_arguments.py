"""The _scaled_mm argument checks of tests/scaled_mm_checks.py on the GPU: every out dtype with
fast accumulation on and off (bounded by the accumulator width measured on the device), bias
under non-unit scales, rows not a multiple of the kernel's tile, compiled against exact, FP8
output with scale_result, and the accumulator width itself."""

import pytest

from tests.scaled_mm_checks import (  # noqa: F401 - collected as tests of this module
    test_bias_is_added_once_under_non_unit_scales,
    test_compiled_scaled_mm_matches_the_exact_product,
    test_every_out_dtype_matches_the_exact_product,
    test_fp8_output_applies_scale_result,
    test_rows_not_a_multiple_of_the_tile,
    test_scale_forms_and_odd_shapes_give_right_results_where_accepted,
    test_without_fast_accumulation_partial_sums_are_promoted_to_float32,
)

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
