"""The GEMM probes and the _scaled_mm argument checks can fail: each is run against a stand-in
``_scaled_mm`` with one known fault, and must report it."""

import math

import pytest
import torch

from fp8ref.harness.gemm.gemm_probes import (
    accumulation_bound,
    accumulator_bits,
    interval_products,
    promotion_interval,
    scale_result_rule,
    scaled_mm_kernels,
)
from fp8ref.harness.gemm.scaled_mm_regressions import case, excess, run
from fp8ref.harness.gemm.scaled_mm_regressions import stand_in as _stand_in
from fp8ref.harness.profiles.profile_file import diff
from fp8ref.harness.stack import probes


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
def test_the_bound_catches_a_wrong_gemm(fault, scaling, monkeypatch, skip_if_refused):
    skip_if_refused(probes.scaled_mm_refusal(scaling), f"{scaling} torch._scaled_mm on cpu")
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
    from fp8ref.harness.gemm.gemm_probes import exact_sum_operands

    a, b = exact_sum_operands(64, 1024, 48)
    partial = (a.double()[:, None, :] * b.double()[None, :, :]).cumsum(-1)
    assert partial.abs().max() <= 2**12  # every integer up to 2^12 needs at most 12 significant bits
    assert bool((a == a.round()).all()) and a.abs().max() <= 2
    with pytest.raises(ValueError, match="k: at most 1024"):
        exact_sum_operands(4, 2048, 4)


def test_the_scale_form_probe_catches_a_one_element_scale_read_as_one(monkeypatch):
    from fp8ref.harness.gemm.gemm_probes import scale_forms_and_shapes

    monkeypatch.setattr(torch, "_scaled_mm", _stand_in())
    assert not [v for v in scale_forms_and_shapes("cpu").values() if v.startswith("wrong")]
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(vector_scale_ignored=True))
    got = scale_forms_and_shapes("cpu")
    assert got["tensorwise.1"].startswith("wrong") and got["tensorwise.0d"] == "ok", got


def _sum_in_blocks(p: torch.Tensor, bits: int, interval: int | None, reverse: bool) -> float:
    """One summation of the products ``p`` (float64), in order or reversed, by an accumulator that
    keeps ``bits`` mantissa bits inside blocks of ``interval`` products and float32's 24 between."""

    def keep(v: float, b: int) -> float:
        m, e = math.frexp(v)
        return math.ldexp(round(m * 2.0 ** (b + 1)) / 2.0 ** (b + 1), e)

    values = p.flip(0).tolist() if reverse else p.tolist()
    n = len(values) if interval is None else interval
    total = 0.0
    for start in range(0, len(values), n):
        part = 0.0
        for v in values[start : start + n]:
            part = keep(part + v, bits)
        total = keep(total + part, 23)
    return total


# (bits, interval, whether the float32-only bound 2(K+3)2^-24 m holds): Hopper-like 13 bits,
# promoted every 128 or never, exceed it; float32 keeps it; 13 bits in blocks of 32 may or may not
@pytest.mark.parametrize(
    "bits,interval,float32_bound", [(13, 128, False), (13, None, False), (23, 1, True), (13, 32, None)]
)
def test_two_summation_orders_stay_within_the_derived_accumulation_bound(bits, interval, float32_bound):
    """Two kernels may sum the same products in other orders with other accumulators: forward and
    reversed, each with ``bits`` inside blocks of ``interval``, differ by at most twice
    ``accumulation_bound``; the float32-only bound the checks used before holds only by luck on
    an accumulator narrower than float32's."""
    gen = torch.Generator().manual_seed(bits + (interval or 0))
    k = 512
    worst, float32_only_exceeded = 0.0, False
    for _ in range(20):
        p = torch.randn(k, generator=gen, dtype=torch.float64) * torch.exp2(torch.randint(-4, 4, (k,), generator=gen))
        m = float(p.abs().sum())
        diff = abs(_sum_in_blocks(p, bits, interval, False) - _sum_in_blocks(p, bits, interval, True))
        worst = max(worst, diff / m)
        float32_only_exceeded |= diff > 2 * (k + 3) * 2.0**-24 * m
    assert worst <= 2 * accumulation_bound(k, bits, interval), (worst, accumulation_bound(k, bits, interval))
    if float32_bound is not None:
        assert float32_only_exceeded == (not float32_bound)


def test_the_accumulation_bound_on_the_cpu_is_the_float32_one():
    """On the CPU (23 bits, every product promoted) the derived bound is the float32 bound the
    checks used before: (K + 3) 2^-24."""
    within = accumulator_bits("cpu", True, "within")
    interval = interval_products(promotion_interval("cpu", True))
    assert (within, interval) == (23, 1)
    assert accumulation_bound(256, within, interval) == (256 + 3) * 2.0**-24
    assert interval_products("none up to 1024") is None and interval_products("128") == 128
    with pytest.raises(ValueError, match="k: expected a positive int"):
        accumulation_bound(0, 13, None)


def test_a_change_of_backend_is_one_line_of_the_profile_diff(monkeypatch):
    """scaled_mm.kernels.* records which kernels ran: another backend behind the same call (here a
    float64 stand-in, which runs other ops) changes that key, and only it."""
    real = scaled_mm_kernels("tensorwise")
    assert "aten::_scaled_mm" in real
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in())
    other = scaled_mm_kernels("tensorwise")
    assert other != real

    def profile(kernels: str) -> dict:
        return {"fp8ref_profile": 1, "versions": {}, "behaviour": {"scaled_mm.kernels.tensorwise": kernels, "x": 1}}

    assert [d[0] for d in diff(profile(real), profile(other))] == ["scaled_mm.kernels.tensorwise"]
