"""The codec proved against the definition (``fp8ref.reference.definition``): for every format fp8ref
defines and every input class (all bfloat16 and float16 patterns, float32 subnormals, float32
boundaries and midpoints +-1 ulp, random float32 patterns), in every rounding mode, saturating and
not, the codec's value is the one the value table and exact float64 comparisons give. Stochastic
rounding with the random bits given: random ones, and the two either side of each input's threshold,
so its probability of going up is pinned exactly. ``--fp8-slow`` runs every float32 subnormal and
2^22 random patterns. The counts are printed at the end of the run.
"""

import math

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import definition_input_classes
from fp8ref.harness.oracles.definition_check import compare_all_modes
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.definition import (
    beyond_max,
    neighbours,
    overflows,
    round_by_definition,
    sr_up_probability,
    value_table,
)
from fp8ref.reference.formats import E4M3FN, E5M2, E8M0FNU, FORMATS
from tests.common.params import ALL_FORMATS

CLASSES = ["bf16 patterns", "f16 patterns", "f32 subnormals", "f32 boundaries", "f32 random"]


def _check(fmt, name, x, record_oracle_report):
    failures = []
    for report in compare_all_modes(encode, x, fmt, name):
        record_oracle_report(report)
        if not report.ok:
            failures.append(report.failure_message())
    assert not failures, "\n".join(failures)


@pytest.mark.exhaustive
@pytest.mark.parametrize("inputs", CLASSES)
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_codec_rounds_like_the_definition(fmt, inputs, record_oracle_report):
    _check(fmt, inputs, definition_input_classes(fmt)[inputs], record_oracle_report)


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("inputs", ["f32 subnormals", "f32 random"])
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_codec_rounds_like_the_definition_on_every_float32_subnormal(fmt, inputs, record_oracle_report):
    """--fp8-slow: every float32 subnormal of both signs where the format reaches below 2^-126
    (E8M0), and 2^22 random float32 patterns."""
    _check(fmt, f"{inputs} (full)", definition_input_classes(fmt, full=True)[inputs], record_oracle_report)


def _f32(bits: list[int]) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)


def test_e8m0_of_float32_subnormals_is_the_nearest_power_of_two():
    """(2^-127, 1.5 x 2^-127) is nearer 2^-127 (code 0x00) than 2^-126 (0x01): float32 bits
    0x00400001-0x005FFFFF and bfloat16 patterns 0x0041-0x005F. The tie 1.5 x 2^-127 goes up."""
    band = _f32([0x00400001, 0x00500000, 0x005FFFFF])
    assert encode(band, E8M0FNU).tolist() == [0x00] * 3
    assert encode(band, E8M0FNU, rounding="rtz").tolist() == [0x00] * 3
    assert encode(_f32([0x00400000, 0x00600000, 0x00600001, 0x007FFFFF]), E8M0FNU).tolist() == [0, 1, 1, 1]
    bf16 = torch.tensor([0x0041, 0x0050, 0x005F, 0x0060, 0x0061], dtype=torch.int16).view(torch.bfloat16)
    assert encode(bf16, E8M0FNU).tolist() == [0, 0, 0, 1, 1]
    # below 2^-127 there is nothing smaller to go to
    assert encode(_f32([1, 0x00200000, 0x003FFFFF]), E8M0FNU).tolist() == [0, 0, 0]


def test_e8m0_stochastic_rounding_below_float32_normals_has_the_definitions_probability():
    """On [2^-127, 2^-126) SR goes up with probability (x - 2^-127) / 2^-127: never for 2^-127
    itself, for exactly the 2^22 of 2^24 draws r < 2^22 at 1.25 x 2^-127."""
    r = torch.tensor([0, (1 << 22) - 1, 1 << 22, (1 << 24) - 1])
    x = torch.full((4,), 2.0**-127)
    assert encode(x, E8M0FNU, rounding="sr", random_bits=r).tolist() == [0, 0, 0, 0]
    x = torch.full((4,), 1.25 * 2.0**-127)
    assert encode(x, E8M0FNU, rounding="sr", random_bits=r).tolist() == [1, 1, 0, 0]
    assert sr_up_probability(x, E8M0FNU).tolist() == [0.25] * 4


def test_stochastic_rounding_far_below_the_smallest_subnormal_keeps_its_probability():
    """2^-20 into E4M3FN (smallest subnormal 2^-9) goes up with probability 2^-11: the draws
    r < 2^13 exactly, not a probability clamped to a few dropped bits."""
    r = torch.tensor([0, (1 << 13) - 1, 1 << 13, 1 << 20])
    x = torch.full((4,), 2.0**-20)
    assert encode(x, E4M3FN, rounding="sr", random_bits=r).tolist() == [1, 1, 0, 0]
    # further down, the 24 random bits round the probability up to 2^-24: only r = 0 goes up
    x = torch.full((4,), 2.0**-60)
    assert encode(x, E4M3FN, rounding="sr", random_bits=r).tolist() == [1, 0, 0, 0]


def test_e8m0_ties_round_up_as_the_codec_states():
    """The codec's docstring: an E8M0 tie (1.5 x 2^e) rounds up, away from zero. Every e."""
    from fp8ref.reference import codec

    assert "tie between two powers of two (1.5 x 2^e) rounds *up*" in " ".join((codec.__doc__ or "").split())
    e = torch.arange(-127, 127, dtype=torch.float64)
    ties = (1.5 * torch.exp2(e)).float()
    got = decode(encode(ties, E8M0FNU), E8M0FNU).double()
    assert torch.equal(got, torch.exp2(e + 1))
    assert torch.equal(round_by_definition(ties, E8M0FNU), torch.exp2(e + 1))


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_the_value_table_is_read_from_the_codes(fmt):
    table = value_table(fmt)
    codes = torch.arange(fmt.n_codes, dtype=torch.int32).to(torch.uint8)
    decoded = decode(codes, fmt).double()
    finite = decoded[torch.isfinite(decoded) & (decoded >= 0)]
    assert torch.equal(table, torch.unique(finite))
    assert table[-1] == fmt.max and beyond_max(fmt) > fmt.max


def test_beyond_max_continues_the_top_binade():
    assert (beyond_max(E4M3FN), beyond_max(E5M2), beyond_max(E8M0FNU)) == (480.0, 65536.0, 2.0**128)
    # so 464 (E4M3FN's tie above max) stays at 448 and 61440 (E5M2's) overflows to inf
    assert round_by_definition(torch.tensor([464.0]), E4M3FN).item() == 448.0
    assert round_by_definition(torch.tensor([61440.0]), E5M2).item() == math.inf


def test_a_float64_input_is_rounded_once():
    """Just above E4M3FN's tie 1.0625 between 1 and 1.125: float64 keeps it above (1.125); through
    float32 it lands on the tie and goes to the even 1.0 (the double rounding a float64 source
    must not get)."""
    x = torch.tensor([1.0625 + 2.0**-40], dtype=torch.float64)
    assert round_by_definition(x, E4M3FN).item() == 1.125
    assert round_by_definition(x.float(), E4M3FN).item() == 1.0


def test_the_definition_refuses_bad_input():
    with pytest.raises(ValueError, match="random_bits"):
        round_by_definition(torch.ones(2), E4M3FN, rounding="sr")
    with pytest.raises(ValueError, match="rounding"):
        round_by_definition(torch.ones(2), E4M3FN, rounding="nearest")
    with pytest.raises(TypeError, match="x"):
        round_by_definition(torch.ones(2, dtype=torch.int32), E4M3FN)
    with pytest.raises(ValueError, match="has no NaN"):
        round_by_definition(torch.tensor([float("nan")]), FORMATS["e2m1fn"])


def test_the_definitions_helpers_refuse_bad_input():
    with pytest.raises(ValueError, match="fmt"):
        value_table("e9m9")
    with pytest.raises(TypeError, match="a: expected dtype"):
        neighbours(torch.ones(2), E4M3FN)
    with pytest.raises(ValueError, match="a: expected finite magnitudes"):
        neighbours(torch.tensor([-1.0], dtype=torch.float64), E4M3FN)
    with pytest.raises(ValueError, match="whether SR overflows depends"):
        overflows(torch.ones(2), E4M3FN, "sr")


def test_the_codec_refuses_bad_random_bits():
    x = torch.ones(3)
    with pytest.raises(ValueError, match="random_bits: only stochastic"):
        encode(x, E4M3FN, random_bits=torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="random_bits: expected x's shape"):
        encode(x, E4M3FN, rounding="sr", random_bits=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"random_bits: expected values in \[0, 2\^24\)"):
        encode(x, E4M3FN, rounding="sr", random_bits=torch.full((3,), 1 << 24))
    with pytest.raises(TypeError, match="random_bits: expected an integer tensor"):
        encode(x, E4M3FN, rounding="sr", random_bits=torch.zeros(3))
    with pytest.raises(ValueError, match="not both"):
        encode(x, E4M3FN, rounding="sr", random_bits=torch.zeros(3, dtype=torch.int64), generator=torch.Generator())
