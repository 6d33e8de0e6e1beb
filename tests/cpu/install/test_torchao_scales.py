"""torchao's float8 scales, dynamic casts, recipe table and MX conversion against fp8ref.

Bitwise wherever both follow the same documented formula. Where torchao's implementation
differs from the formula at an edge (found here, listed in docs/torchao-findings.md), a test pins
the difference on a crafted input (FLOOR's divisor of a tiny block), or, for a named deviation
(fp8ref/harness/casts/deviations.py: pow2 rounding through a float32 log2), accepts the definition's
answer or exactly the deviation's and records which; any other answer fails.
"""

import math

import pytest
import torch

from fp8ref.harness.ao import scale_edges as sec
from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.harness.ao.mx_modes import as_held
from fp8ref.harness.ao.scales_and_recipes import recipe_table_diffs, scale_inputs, scale_mismatch
from fp8ref.reference.codec import decode
from fp8ref.reference.formats import E4M3FN, E5M2, select
from fp8ref.reference.quantize import Quantized, quantize
from fp8ref.reference.recipes import TORCHAO_RECIPES
from fp8ref.reference.scaling import axiswise, mx, mx_scale_exponent, tensorwise

pytestmark = [pytest.mark.needs("torchao")]

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
GRANS = [tensorwise(), axiswise(-1), axiswise(0), axiswise(1)]
CAST_GRANS = GRANS[:3]  # Float8TrainingTensor accepts axiswise_dim None, 0 or -1 only


def _cases(grans):
    """dtype x format x granularity x pow2, as (dtype, fmt, g, pow2) params."""
    return pytest.mark.parametrize(
        "dtype,fmt,g,pow2",
        [
            pytest.param(d, f, g, p, id=f"{d}-{f}-{g}-{'pow2' if p else 'plain'}".replace("torch.", ""))
            for d in DTYPES
            for f in (E4M3FN, E5M2)
            for g in grans
            for p in (False, True)
        ],
    )


@_cases(GRANS)
def test_scales_are_bitwise_equal(dtype, fmt, g, pow2):
    problem = scale_mismatch(ao.tensor_to_scale, scale_inputs(dtype), fmt, g, pow2)
    assert problem is None, f"torchao {problem}"


@_cases(CAST_GRANS)
def test_dynamic_cast_data_and_scale_are_bitwise_equal(dtype, fmt, g, pow2):
    x = scale_inputs(dtype)
    codes, scale = ao.dynamic_cast(x, fmt, g, pow2)
    q = quantize(x, fmt, g, pow2=pow2)
    assert torch.equal(scale.view(torch.int32), q.scale.view(torch.int32))
    bad = (codes != q.codes).nonzero()
    assert bad.numel() == 0, f"{bad.shape[0]} codes differ, first at {bad[:4].tolist()}"


def test_pow2_round_down_of_scales_just_below_a_power_of_two(record_observation, record_defect):
    """torchao's pow2 rounding (``_round_scale_down_to_power_of_2``, documented as
    exp2(floor(log2(scale)))) of float32 scales 2^k and one ulp either side, k = -60..60: the
    largest power of two <= the scale, as the definition says. Its float32 log2 rounds k - tiny up
    to k, so a scale one ulp below 2^k may get 2^k: the named deviation ``pow2_f32_log2``
    (fp8ref/harness/casts/deviations.py, with the versions it was seen on), excused for exactly
    those scales and that answer and recorded; any other answer fails."""
    from torchao.float8.float8_utils import _round_scale_down_to_power_of_2

    problem, known_deviations = sec.check_pow2_round_down(_round_scale_down_to_power_of_2)
    record_observation(
        "torchao pow2 rounding of scales at 2^k and one ulp either side",
        sec.known_deviation_words(known_deviations, sec.pow2_edge_scales().numel()),
    )
    for key, n in known_deviations.items():
        record_defect(key, "torchao _round_scale_down_to_power_of_2", n)
    assert problem is None, f"torchao {problem}"


@pytest.mark.parametrize("j", [-3, 0, 5])
def test_pow2_scale_for_an_amax_one_ulp_above_max_over_a_power_of_two(j, record_observation, record_defect):
    """An amax one float32 ulp above 448 / 2^k (k = 8 - j): 448 / amax rounds to the float32 one
    ulp below 2^k, whose pow2 round-down is 2^(k-1) by the definition. torchao's
    ``tensor_to_scale(..., round_scales_to_power_of_2=True)`` gives that, or exactly 2^k (the
    named deviation ``pow2_f32_log2``, recorded); any other scale fails."""
    a = torch.nextafter(torch.tensor(1.75 * 2.0**j), torch.tensor(math.inf))
    x = torch.tensor([a.item(), -a.item() / 2])
    problem, known_deviations = sec.check_pow2_scale(lambda t: ao.tensor_to_scale(t, E4M3FN, tensorwise(), True), x)
    record_observation(f"torchao pow2 scale for amax {a.item()!r}", sec.known_deviation_words(known_deviations, 1))
    for key, n in known_deviations.items():
        record_defect(key, "torchao tensor_to_scale (pow2)", n)
    assert problem is None, f"torchao {problem}"


def test_recipe_table_matches_fp8ref_recipes():
    diffs = recipe_table_diffs(ao.recipe_table, TORCHAO_RECIPES)
    assert not diffs, "torchao's recipe table against fp8ref's:\n" + "\n".join(diffs)


MX_FORMATS = [pytest.param(f, id=f.name) for f in select(mx_element=True)]


def _mx_inputs(dtype=torch.float32):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(16, 128, generator=gen) * torch.exp2(
        torch.randint(-20, 20, (16, 4), generator=gen).float()
    ).repeat_interleave(32, dim=1)
    x[0, :32] = 0.0
    return x.to(dtype)


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("fmt", MX_FORMATS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_mx_scales_and_elements_are_bitwise_equal(dtype, fmt, mode):
    """Each MX element format (MXFP8, MXFP6, MXFP4): scales and element codes (FP4 packed)."""
    x = _mx_inputs(dtype)
    scale, data = ao.to_mx(x, fmt, 32, mode)
    q = quantize(x, fmt, mx(32, mode))
    ours = as_held(q.codes, fmt)
    assert torch.equal(scale, q.scale_e8m0), "E8M0 scales differ"
    assert torch.equal(data, ours), f"{int((data != ours).sum())} element bytes differ"


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_a_nan_scale_makes_its_whole_block_nan(fmt):
    """What the OCP MX spec fixes about special values (docs/design.md, "MX blocks holding inf or
    NaN"): a block whose E8M0 scale is NaN (0xFF) is NaN in every element, whatever the element
    codes hold. torchao's MX dequantization and fp8ref's, on every element code."""
    codes = (torch.arange(64, dtype=torch.int32) % fmt.n_codes).to(torch.uint8).reshape(2, 32)
    theirs = ao.mx_dequantize(as_held(codes, fmt), torch.tensor([[0xFF], [0x7F]], dtype=torch.uint8), fmt)
    assert bool(torch.isnan(theirs[0]).all()), f"torchao dequantizes a NaN-scaled block to {theirs[0, :4].tolist()}"
    q = Quantized(codes, torch.tensor([[float("nan")], [1.0]]), mx(32), fmt, torch.float32)
    assert bool(torch.isnan(q.dequantize()[0]).all())
    assert not bool(torch.isnan(theirs[1]).any()) or fmt.has_nan  # (the 2^0 block decodes its codes)


@pytest.mark.parametrize("special", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_a_block_holding_inf_or_nan_changes_only_its_own_scale(mode, special, record_observation):
    """Which scale a block holding inf or NaN gets, the spec leaves open: each implementation's is
    observed (printed here; torchao's pinned as ``torchao.mx.<mode>.special_block_scale``). What
    must hold whatever it is: the other blocks' scales and elements are those of the same tensor
    without the special value."""
    x = _mx_inputs()
    clean_scale, clean_data = ao.to_mx(x, E4M3FN, 32, mode)
    x[3, 40] = float(special)  # block (3, 1)
    scale, data = ao.to_mx(x, E4M3FN, 32, mode)
    ours = quantize(x, E4M3FN, mx(32, mode)).scale_e8m0
    record_observation(
        f"mx {mode}: E8M0 scale of a block holding {special}",
        f"torchao 0x{int(scale[3, 1]):02x}, fp8ref 0x{int(ours[3, 1]):02x}",
    )
    others = torch.ones_like(scale, dtype=torch.bool)
    others[3, 1] = False
    assert torch.equal(scale[others], clean_scale[others])
    assert torch.equal(ours[others], quantize(_mx_inputs(), E4M3FN, mx(32, mode)).scale_e8m0[others])
    rows = torch.ones(x.shape[0], dtype=torch.bool)
    rows[3] = False
    assert torch.equal(data[rows], clean_data[rows])


def test_mx_floor_elements_under_the_smallest_scale(record_observation, record_defect):
    """A block whose FLOOR scale is 2^-127 (E8M0 code 0): by the definition its elements are
    x / 2^-127 (2^-125 -> 4.0). torchao divides by float32's smallest normal 2^-126 instead (the
    named deviation ``mx_tiny_scale_clamped_divisor``, half the value: 2.0), excused for exactly
    that answer and recorded; any other answer fails."""
    from fp8ref.harness.casts.deviations import TORCHAO_MX_TINY_SCALE_CLAMPED as deviation

    x = torch.full((1, 32), 2.0**-125)
    scale, data = ao.to_mx(x, E4M3FN, 32, "floor")
    q = quantize(x, E4M3FN, mx(32, "floor"))
    assert int(scale) == int(q.scale_e8m0) == 0  # both store 2^-127
    ours, theirs = q.values()[0, 0].item(), E4M3FN.value_of(int(data[0, 0]))
    assert ours == 4.0  # (the reference: 2^-125 / 2^-127)
    record_observation("torchao mx floor: element of 2^-125 under scale 2^-127", f"torchao {theirs} (fp8ref {ours})")
    if theirs == ours:
        return
    deviating = float(deviation.answer(torch.tensor(ours)))
    assert bool(deviation.inputs(scale.reshape(-1)[:1])[0]) and theirs == deviating, (
        f"torchao gives {theirs} for 2^-125 under scale 2^-127: neither the definition's {ours} nor the named "
        f"deviation's {deviating}"
    )
    record_defect(deviation.key, "torchao to_mx floor (scale 2^-127)", 32)


def test_mx_exponent_formula_matches_torchao_floor_on_normal_amax():
    a = torch.exp2(torch.linspace(-100, 100, 2001))
    ours = mx_scale_exponent(a, E4M3FN, "floor")
    x = torch.zeros(a.numel(), 32)
    x[:, 0] = a
    scale, _ = ao.to_mx(x, E4M3FN, 32, "floor")
    assert torch.equal(scale.reshape(-1).int() - 127, ours.int())


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_all_zero_blocks_and_the_e8m0_extremes(fmt, mode):
    """Guards: an E8M0 scale computed wrongly at its ends. Blocks: all zero (scale 2^-127 in both,
    elements 0), amax 2^-140 (below the smallest scale: clamped to code 0), amax near float32's
    max (the largest code an amax can reach). Scales bitwise for every block; elements bitwise
    except where FLOOR's tiny-scale divisor differs (pinned above)."""
    x = torch.zeros(4, 32)
    x[1] = torch.linspace(-1, 1, 32) * 2.0**-140
    x[2] = torch.linspace(-1, 1, 32) * 3.0e38
    x[3] = torch.linspace(-1, 1, 32)
    scale, data = ao.to_mx(x, fmt, 32, mode)
    q = quantize(x, fmt, mx(32, mode))
    assert torch.equal(scale, q.scale_e8m0), (
        f"E8M0 scales: torchao {scale.flatten().tolist()}, fp8ref {q.scale_e8m0.flatten().tolist()}"
    )
    assert int(q.scale_e8m0[0, 0]) == 0 and int(q.scale_e8m0[1, 0]) == 0
    ours = as_held(q.codes, fmt)
    assert torch.equal(data[0], ours[0]) and not bool(data[0].any()), "an all-zero block's elements"
    assert torch.equal(data[2:], ours[2:]), "elements of the large and ordinary blocks"


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_dequantization_reads_every_scale_code(fmt):
    """Guards: a bad E8M0 expansion (one once zeroed the blocks whose scale byte was 0). torchao's
    dequantization against fp8ref's decode x 2^(code - 127), bitwise in float32, for scale codes
    0 (2^-127), 1, 127, 254 (2^127) and 255 (NaN: the whole block is NaN)."""
    positive = fmt.n_codes >> 1  # every non-negative code of the format, smallest first
    first = 0x20 if fmt.bits == 8 else 1  # small positive elements (FP8), or all of them
    codes = (torch.arange(32) % (positive - first) + first).to(torch.uint8).repeat(5, 1)
    scale_codes = torch.tensor([[0], [1], [127], [254], [255]], dtype=torch.uint8)
    theirs = ao.mx_dequantize(as_held(codes, fmt), scale_codes, fmt, 32, torch.float32)
    ours = decode(codes, fmt) * torch.exp2(scale_codes.float() - 127)
    ours[4] = float("nan")
    same = (theirs == ours) | (torch.isnan(theirs) & torch.isnan(ours))
    assert bool(same.all()), f"blocks differ at scale codes {scale_codes[~same.all(1)].flatten().tolist()}"
    assert bool((theirs[0] != 0).any()), "scale code 0 zeroed its block"


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mxtensor_dequantizes_like_the_reference(fmt, mode):
    """``MXTensor.to_mx(...).dequantize()``, the tensor subclass end to end, against fp8ref's
    quantize + dequantize, bitwise in float32 (the all-zero block included: its 2^-127 scale
    dequantizes zeros either way)."""
    x = _mx_inputs()
    theirs = ao.mx_tensor_dequantize(x, fmt, 32, mode, torch.float32)
    ours = quantize(x, fmt, mx(32, mode)).dequantize(torch.float32)
    assert torch.equal(theirs, ours), f"{int((theirs != ours).sum())} elements differ"
