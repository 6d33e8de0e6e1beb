"""Scales at the edges a float32 log2 decides, through fp8ref/harness/ao/scale_edges.py (which
tests/cpu/install/test_torchao_scales.py and test_mx_linear.py hold torchao to): a named deviation
is excused only for its exact answer, so a pow2 rounding that rounds up, or to the nearest power
of two, or gives one ulp below 2^k twice the deviation's answer, is caught, and so are an RCEIL
that is FLOOR and an MX amax taken through bfloat16. The definition and each deviation's own
answer pass (the deviation counted)."""

import pytest
import torch

from fp8ref.harness.ao import scale_edges as sec
from fp8ref.harness.casts.deviations import POW2_SCALE_DEVIATIONS, TORCHAO_RCEIL_F32_LOG2
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import amax, amax_to_scale, mx, round_down_to_pow2


def _through_f32_log2(s: torch.Tensor) -> torch.Tensor:
    # the deviating computation, written out: exp2(floor(log2(s))) in float32
    return torch.exp2(torch.floor(torch.log2(s)))


POW2_FAULTS = {
    "rounds up": lambda s: torch.exp2(torch.ceil(torch.log2(s.double()))).float(),
    "rounds to the nearest power of two": lambda s: torch.exp2(torch.round(torch.log2(s.double()))).float(),
    "one ulp below 2^k gets 2^(k+1)": lambda s: torch.where(
        POW2_SCALE_DEVIATIONS[0].inputs(s), 2 * POW2_SCALE_DEVIATIONS[0].answer(s), round_down_to_pow2(s)
    ),
}
# what the pow2 scale of one amax tells apart (one ulp below 2^k: the definition gives 2^(k-1), the
# deviation 2^k; rounding up or to nearest gives 2^k there too, which only other scales show)
POW2_SCALE_FAULTS = {
    "not rounded": lambda s: s,
    "one ulp below 2^k gets 2^(k+1)": POW2_FAULTS["one ulp below 2^k gets 2^(k+1)"],
    "rounded down twice": lambda s: round_down_to_pow2(round_down_to_pow2(s) * 0.75),
}


def _pow2_scale(round_down):
    """A tensorwise E4M3 scale of x as torchao's formula gives it, rounded by ``round_down``."""
    return lambda x: round_down(amax_to_scale(x.abs().amax(), E4M3FN))


def _amaxes() -> list[torch.Tensor]:
    out = []
    for j in (-3, 0, 5):  # as the install test: 448 / amax one ulp below 2^(8 - j)
        a = torch.nextafter(torch.tensor(1.75 * 2.0**j), torch.tensor(float("inf")))
        out.append(torch.tensor([a.item(), -a.item() / 2]))
    return out


def pow2_fault_caught(fault: str) -> bool:
    return sec.check_pow2_round_down(POW2_FAULTS[fault])[0] is not None


def pow2_scale_fault_caught(fault: str) -> bool:
    return all(sec.check_pow2_scale(_pow2_scale(POW2_SCALE_FAULTS[fault]), x)[0] is not None for x in _amaxes())


def test_the_definition_and_the_named_deviation_pass_the_pow2_checks():
    assert sec.check_pow2_round_down(round_down_to_pow2) == (None, {})
    problem, excused = sec.check_pow2_round_down(_through_f32_log2)
    assert problem is None and excused == {"pow2_f32_log2": 117}, (problem, excused)  # k in -60..-2, 3..60
    for x in _amaxes():
        assert sec.check_pow2_scale(_pow2_scale(round_down_to_pow2), x) == (None, {})
        assert sec.check_pow2_scale(_pow2_scale(_through_f32_log2), x) == (None, {"pow2_f32_log2": 1})


@pytest.mark.parametrize("fault", list(POW2_FAULTS))
def test_pow2_rounding_fault_is_caught(fault):
    assert pow2_fault_caught(fault), f"the pow2 rounding check did not notice: {fault}"


@pytest.mark.parametrize("fault", list(POW2_SCALE_FAULTS))
def test_pow2_scale_fault_is_caught(fault):
    assert pow2_scale_fault_caught(fault), f"the pow2 scale check did not notice: {fault}"


_NO_ELEMENTS = torch.empty(0, dtype=torch.uint8)  # the check compares the scales only


def _right(x, fmt, block_size, mode):
    return quantize(x, fmt, mx(block_size, mode)).scale_e8m0, _NO_ELEMENTS


def _rceil_through_f32_log2(x, fmt, block_size, mode):
    return TORCHAO_RCEIL_F32_LOG2.answer(amax(x, mx(block_size, mode)), fmt), _NO_ELEMENTS


def _amax_through_bfloat16(x, fmt, block_size, mode):
    # the regression the boundary blocks guard: the block amax rounded to bfloat16 first
    y = x.float().to(torch.bfloat16).float()
    return quantize(y, fmt, mx(block_size, mode)).scale_e8m0, _NO_ELEMENTS


MX_FAULTS = {
    "RCEIL is FLOOR": (lambda x, fmt, b, mode: _right(x, fmt, b, "floor"), "rceil"),
    "amax through bfloat16 (FLOOR)": (_amax_through_bfloat16, "floor"),
    "amax through bfloat16 (RCEIL)": (_amax_through_bfloat16, "rceil"),
}


def mx_boundary_fault_caught(fault: str) -> bool:
    to_mx, mode = MX_FAULTS[fault]
    return sec.check_mx_boundary_scales(to_mx, torch.float32, mode)[0] is not None


def test_the_definition_and_the_named_deviation_pass_the_mx_boundary_check():
    for mode in ("floor", "rceil"):
        for dtype in (torch.float32, torch.bfloat16):
            assert sec.check_mx_boundary_scales(_right, dtype, mode) == (None, {})
    problem, excused = sec.check_mx_boundary_scales(_rceil_through_f32_log2, torch.float32, "rceil")
    assert problem is None and excused.get("rceil_f32_log2", 0) > 0, (problem, excused)


@pytest.mark.parametrize("fault", list(MX_FAULTS))
def test_mx_boundary_fault_is_caught(fault):
    assert mx_boundary_fault_caught(fault), f"the MX boundary check did not notice: {fault}"
