"""The definition catches faults in the reference itself: stand-ins for the codec carrying mistakes
it once had (or could have), run through ``definition_check`` on the same input classes as
``tests/cpu/reference/test_definition.py``. Each must be reported; a correct codec must pass.

- float32's grid for float32 subnormals: the input's exponent taken as float32's floor, -126, so
  E8M0 (whose smallest exponent is -127) rounds (2^-127, 1.5 x 2^-127) up to 2^-126 and SR goes up
  with probability x / 2^-126 there;
- SR with its dropped bits clamped: far below the smallest subnormal the probability of going up
  read from the last 26 bits only (2^-20 into E4M3FN went up one time in 8 instead of 1 in 2048);
- ties to odd: the midpoint goes to the odd neighbour;
- E8M0 ties by the exponent field's parity (gfloat's reading), not up as the codec states.
"""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import definition_input_classes
from fp8ref.harness.oracles.definition_check import compare_all_modes
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E5M2, E8M0FNU


def _float32_grid_for_subnormals(x, fmt, *, saturate, rounding, random_bits=None):
    codes = encode(x, fmt, saturate=saturate, rounding=rounding, random_bits=random_bits)
    a = x.float()
    sub = (a > 0) & (a < 2.0**-126)
    if fmt.min_subnormal >= 2.0**-126:
        return codes
    if rounding == "rne":
        old = (a > 2.0**-127).to(torch.uint8)
    elif rounding == "rtz":
        old = torch.zeros_like(codes)
    else:  # up with probability x / 2^-126: r < x * 2^126 * 2^24
        old = (random_bits.double() < a.double() * 2.0**150).to(torch.uint8)
    return torch.where(sub, old, codes)


def _sr_clamped_to_26_bits(x, fmt, *, saturate, rounding, random_bits=None):
    codes = encode(x, fmt, saturate=saturate, rounding=rounding, random_bits=random_bits)
    if rounding != "sr":
        return codes
    a = x.float().abs()
    m, e = torch.frexp(a.double())
    far = (a > 0) & (e - 1 < fmt.emin - fmt.man_bits - 3)  # more than 26 bits dropped
    sig = (m * 2.0**24).to(torch.int64)  # the 24-bit significand
    up = random_bits < sig // 4 + (sig % 4 > 0).to(torch.int64)  # r * 2^26 < sig * 2^24
    smallest = torch.where(torch.signbit(x), 0x81, 0x01).to(torch.uint8)
    return torch.where(far, torch.where(up, smallest, torch.zeros_like(codes) | (smallest & 0x80)), codes)


def _ties_to_odd(x, fmt, *, saturate, rounding, random_bits=None):
    codes = encode(x, fmt, saturate=saturate, rounding=rounding, random_bits=random_bits)
    if rounding != "rne":
        return codes
    down = encode(x, fmt, saturate=saturate, rounding="rtz")
    lo = encode(x, fmt, saturate=True, rounding="rtz")
    v_lo, v_hi = decode(lo, fmt).double().abs(), decode(lo + 1, fmt).double().abs()
    tie = x.double().abs() == (v_lo + v_hi) / 2
    return torch.where(tie & ((lo & 1) == 1), down, torch.where(tie, lo + 1, codes))


def _e8m0_ties_by_exponent_parity(x, fmt, *, saturate, rounding, random_bits=None):
    codes = encode(x, fmt, saturate=saturate, rounding=rounding, random_bits=random_bits)
    if rounding != "rne" or fmt.man_bits:
        return codes
    a = x.double()
    m, _ = torch.frexp(a.abs())
    tie = (a > 0) & (m == 0.75)
    down = encode(x, fmt, saturate=saturate, rounding="rtz")
    return torch.where(tie & ((down & 1) == 0), down, codes)


# fault -> (stand-in, format, input classes it shows in)
FAULTS = {
    "float32's grid for float32 subnormals": (
        _float32_grid_for_subnormals,
        E8M0FNU,
        ("f32 subnormals", "bf16 patterns"),
    ),
    "SR's dropped bits clamped to 26": (_sr_clamped_to_26_bits, E4M3FN, ("bf16 patterns", "f32 random")),
    "ties to odd": (_ties_to_odd, E5M2, ("f32 boundaries",)),
    "E8M0 ties by exponent parity": (_e8m0_ties_by_exponent_parity, E8M0FNU, ("f32 boundaries",)),
}


def caught_in(fault: str) -> dict[str, list[str]]:
    """Per input class, the modes in which the definition reports the fault."""
    stand_in, fmt, classes = FAULTS[fault]
    inputs = definition_input_classes(fmt)
    return {c: [r.mode for r in compare_all_modes(stand_in, inputs[c], fmt, c) if not r.ok] for c in classes}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_in_the_reference_is_caught_by_the_definition(fault):
    caught = caught_in(fault)
    assert all(caught.values()), f"the definition did not notice {fault!r} in {caught}"


def test_the_old_subnormal_rule_fails_in_each_rounding_mode_it_touches():
    """The E8M0 band: RNE (nearest is 2^-127) and SR (its probability) both fail; RTZ's answer
    is the same under both rules and passes."""
    caught = caught_in("float32's grid for float32 subnormals")["f32 subnormals"]
    assert {m.split()[0] for m in caught} == {"rne", "sr"}, caught


def test_the_stand_ins_change_nothing_else():
    """Each stand-in is the codec outside its fault: on inputs where the fault cannot show (E4M3FN
    and bfloat16 for the E8M0 faults), it passes."""
    x = definition_input_classes(E4M3FN)["bf16 patterns"]
    for fault in ("float32's grid for float32 subnormals", "E8M0 ties by exponent parity"):
        stand_in = FAULTS[fault][0]
        assert all(r.ok for r in compare_all_modes(stand_in, x, E4M3FN, "bf16 patterns")), fault


def test_the_catch_rate_of_faults_in_the_reference(record_observation):
    results = {f: all(caught_in(f).values()) for f in FAULTS}
    record_observation(
        "tests/meta: faults in the reference caught by the definition", f"{sum(results.values())} of {len(results)}"
    )
    assert all(results.values()), [f for f, ok in results.items() if not ok]
