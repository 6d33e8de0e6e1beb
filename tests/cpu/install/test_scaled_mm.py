"""torch._scaled_mm against the exact product of its FP8 operands, for every out dtype and the
arguments regressions shipped in (the checks of fp8ref/harness/gemm/scaled_mm_regressions.py,
which say what each guards against), on the CPU and on CUDA: every out dtype with fast
accumulation on and off, bias under non-unit scales, rows not a multiple of the kernel's tile,
compiled against exact, FP8 output with scale_result, and the accumulator width itself. Also what
the CPU path enforces."""

import pytest
import torch

from fp8ref.harness.gemm import scaled_mm_regressions as mm
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import tensorwise
from tests.common.params import on_devices

ON_DEVICES = on_devices(pytest.mark.sm(89, "FP8 tensor cores"))


@pytest.fixture
def ragged_m(device: str) -> tuple[int, ...]:
    """Row counts that are not multiples of 16. On CUDA also the tail classes of kernels tiled in
    M: torch asks only K and N to be multiples of 16, so M = 1, 17, 100 and 4111 are legal (one
    row; not a multiple of 16; of 64 or 128; one short of a multiple of 256), with 48, 272 and
    4112 (multiples of 16 but not of 256). The CPU (and the CPU dry run) takes the small ones: its
    path has no tile of its own."""
    return (1, 17, 100) if device == "cpu" else (1, 17, 48, 100, 272, 4111, 4112)


def _mm_operands(g, seed=0, M=64, K=128, N=48):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen) * 3
    b = torch.randn(N, K, generator=gen) / 3
    return quantize(a, E4M3FN, g), quantize(b, E4M3FN, g)


def test_scaled_mm_requirements_on_this_device(record_observation):
    """What _scaled_mm enforces here (cuBLAS on GPU wants row-major x column-major and dims that
    are multiples of 16; the CPU path is observed). Reported, and 1-D scales must be refused."""
    qa, qb = _mm_operands(tensorwise())
    A, B = qa.codes.view(torch.float8_e4m3fn), qb.codes.view(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    seen = {}
    for name, aa, bb in [
        ("row-major x row-major", A, B.t().contiguous()),
        ("K not a multiple of 16", A[:, :120], B[:, :120].t()),
        ("M not a multiple of 16", A[:60], B.t()),
    ]:
        try:
            torch._scaled_mm(aa, bb, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            seen[name] = "accepted"
        except (RuntimeError, ValueError) as exc:
            seen[name] = f"refused ({type(exc).__name__})"
    record_observation(
        f"_scaled_mm on cpu (torch {torch.__version__})", "; ".join(f"{k}: {v}" for k, v in seen.items())
    )
    with pytest.raises((RuntimeError, ValueError)):
        torch._scaled_mm(
            A, B.t(), scale_a=torch.ones(A.shape[0]), scale_b=torch.ones(B.shape[0]), out_dtype=torch.bfloat16
        )


@ON_DEVICES
@pytest.mark.parametrize("fast_accum", [False, True], ids=["exact-accum", "fast-accum"])
@pytest.mark.parametrize("out_dtype", mm.OUT_DTYPES, ids=str)
@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_every_out_dtype_matches_the_exact_product(scaling, out_dtype, fast_accum, device, skip_if_refused):
    skip_if_refused(*mm.refusal(scaling, out_dtype, device))
    problem = mm.check_every_out_dtype(device, scaling, out_dtype, fast_accum)
    assert problem is None, problem


@ON_DEVICES
@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_bias_is_added_once_under_non_unit_scales(scaling, device, skip_if_refused):
    skip_if_refused(*mm.refusal(scaling, torch.bfloat16, device))
    problem = mm.check_bias_added_once(device, scaling)
    assert problem is None, problem


@ON_DEVICES
@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_rows_not_a_multiple_of_the_tile(scaling, device, ragged_m, skip_if_refused, record_observation):
    skip_if_refused(*mm.refusal(scaling, torch.bfloat16, device))
    problem, kernels = mm.check_ragged_rows(device, scaling, ragged_m)
    record_observation(f"_scaled_mm {scaling} kernels by M on {device}", kernels)
    assert problem is None, problem


@ON_DEVICES
@pytest.mark.parametrize("scaling", mm.SCALINGS)
def test_compiled_scaled_mm_matches_the_exact_product(
    scaling, device, skip_if_refused, record_observation, fresh_dynamo
):
    skip_if_refused(*mm.refusal(scaling, torch.bfloat16, device))
    problem, seen = mm.check_compiled(device, scaling)
    record_observation(f"torch.compile(_scaled_mm) {scaling} on {device}", seen)
    assert problem is None, problem


@ON_DEVICES
@pytest.mark.parametrize("out_dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_fp8_output_applies_scale_result(out_dtype, device, skip_if_refused, record_observation):
    skip_if_refused(*mm.refusal("tensorwise", out_dtype, device))
    problem, rule = mm.check_scale_result(device, out_dtype)
    record_observation(f"_scaled_mm scale_result with {out_dtype} output on {device}", rule)
    assert problem is None, problem


@ON_DEVICES
def test_without_fast_accumulation_partial_sums_are_promoted_to_float32(device, skip_if_refused, record_observation):
    skip_if_refused(*mm.refusal("tensorwise", torch.float32, device))
    problem, seen = mm.check_promotion(device)
    record_observation(f"_scaled_mm accumulator bits on {device} (23 = float32's)", seen)
    assert problem is None, problem


@ON_DEVICES
def test_scale_forms_and_odd_shapes_give_right_results_where_accepted(device, skip_if_refused, record_observation):
    skip_if_refused(*mm.refusal("tensorwise", torch.float32, device))
    problem, seen = mm.check_scale_forms(device)
    record_observation(f"_scaled_mm scale forms and shapes on {device}", seen)
    assert problem is None, problem
