"""The GEMM probes and the _scaled_mm argument checks can fail: each is run against a stand-in
``_scaled_mm`` with one known fault, and must report it."""

import pytest
import torch

from fp8ref.harness import probes
from fp8ref.harness.gemm_probes import accumulator_bits, promotion_interval, scale_result_rule
from tests.common.scaled_mm_checks import case, excess, run
from tests.common.scaled_mm_checks import stand_in as _stand_in


def test_accumulator_probe_measures_a_narrow_accumulator(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(keep_bits=13))
    assert accumulator_bits("cpu", True) == 13
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in())
    assert accumulator_bits("cpu", False) == 23  # float64 sums, capped by the float32 output


@pytest.mark.parametrize("rule", ["divides", "multiplies", "ignored"])
def test_scale_result_probe_tells_the_three_rules_apart(rule, monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(scale_rule=rule))
    assert scale_result_rule("cpu") == rule


@pytest.mark.parametrize(
    "fault,scaling",
    [
        ({"bias_scaled": True}, "tensorwise"),
        ({"row_scale_mean": True}, "rowwise"),
        ({"keep_bits": 8}, "tensorwise"),
    ],
)
def test_the_bound_catches_a_wrong_gemm(fault, scaling, monkeypatch, skip_unless):
    skip_unless(probes.scaled_mm_refusal(scaling), f"{scaling} torch._scaled_mm on cpu")
    c = case(64, 128, 48, scaling, "cpu")
    bias = torch.randn(48, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16) * 8
    assert excess(c, run(c, torch.bfloat16, bias=bias), torch.bfloat16, bias=bias) is None  # the real one
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**fault))
    assert excess(c, run(c, torch.bfloat16, bias=bias), torch.bfloat16, bias=bias) is not None


# --- another GPU generation's accumulator, on the CPU ---------------------------------------------
# Hopper's tensor cores keep about 13 mantissa bits within a K block whatever use_fast_accum says;
# with use_fast_accum=False the partial sum is promoted to float32 every 128 products (DeepSeek-V3).
HOPPER_LIKE = {"keep_bits": 13, "promote_every": 128}


def test_the_probes_tell_within_block_from_promoted_width(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**HOPPER_LIKE))
    got = {(span, fast): accumulator_bits("cpu", fast, span) for span in ("within", "across") for fast in (False, True)}
    assert got == {("within", False): 13, ("within", True): 13, ("across", False): 23, ("across", True): 13}


@pytest.mark.parametrize("every", [128, 256, 512])
def test_the_promotion_interval_is_measured_not_assumed(every, monkeypatch):
    """A GEMM that promotes every 128, 256 or 512 products: the sweep measures that interval, and
    the promotion check (products PROMOTION_K apart) passes each, not only Hopper's 128."""
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(keep_bits=13, promote_every=every))
    assert promotion_interval("cpu", fast_accum=False) == str(every)
    assert promotion_interval("cpu", fast_accum=True) == "none up to 1024"
    assert accumulator_bits("cpu", False, "across") == 23


def test_the_cpus_float32_accumulator_promotes_every_product():
    assert promotion_interval("cpu") == "every product"


def test_a_hopper_like_accumulator_passes_the_promotion_check_and_one_that_never_promotes_fails(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**HOPPER_LIKE))
    assert accumulator_bits("cpu", False, "across") == 23  # what the promotion check asserts
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(keep_bits=13))  # no promotion at all
    assert accumulator_bits("cpu", False, "across") == 13


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("fast_accum", [False, True], ids=["exact-accum", "fast-accum"])
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
def test_exact_sum_checks_pass_a_hopper_like_accumulator(scaling, fast_accum, out_dtype, monkeypatch):
    """The out-dtype, bias and ragged-row checks hold a ~13-bit accumulator to the output's own
    rounding: its partial sums are exact there, so it passes, fast accumulation or not."""
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**HOPPER_LIKE))
    for m, k, n in ((64, 128, 48), (17, 256, 32)):
        c = case(m, k, n, scaling, "cpu", exact_sums=True)
        assert excess(c, run(c, out_dtype, fast_accum=fast_accum), out_dtype) is None, (m, k, n)


@pytest.mark.parametrize("accumulator", [{}, HOPPER_LIKE], ids=["float32-accumulator", "hopper-like"])
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
def test_exact_sum_checks_still_catch_a_float32_output_rounded_through_bf16(scaling, accumulator, monkeypatch):
    """The bug class the float32-output check exists for stays visible on every generation: a
    bound loosened for a 13-bit accumulator would let it through, the exact-sum bound does not."""
    c = case(64, 128, 48, scaling, "cpu", exact_sums=True)
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**accumulator))
    assert excess(c, run(c, torch.float32), torch.float32) is None
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**accumulator, out_via=torch.bfloat16))
    assert excess(c, run(c, torch.float32), torch.float32) is not None


def test_exact_sum_operands_keep_every_partial_sum_exact_at_12_bits():
    from fp8ref.harness.gemm_probes import exact_sum_operands

    a, b = exact_sum_operands(64, 1024, 48)
    partial = (a.double()[:, None, :] * b.double()[None, :, :]).cumsum(-1)
    assert partial.abs().max() <= 2**12  # every integer up to 2^12 needs at most 12 significant bits
    assert bool((a == a.round()).all()) and a.abs().max() <= 2
    with pytest.raises(ValueError, match="k: at most 1024"):
        exact_sum_operands(4, 2048, 4)


def test_the_scale_form_probe_catches_a_one_element_scale_read_as_one(monkeypatch):
    from fp8ref.harness.gemm_probes import scale_forms_and_shapes

    monkeypatch.setattr(torch, "_scaled_mm", _stand_in())
    assert not [v for v in scale_forms_and_shapes("cpu").values() if v.startswith("wrong")]
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(vector_scale_ignored=True))
    got = scale_forms_and_shapes("cpu")
    assert got["tensorwise.1"].startswith("wrong") and got["tensorwise.0d"] == "ok", got
