"""Property tests (hypothesis) for scaled FP8 quantization, each named after its property.

Tensors come from a composite strategy: a seeded base tensor (normal, uniform, wide log-normal
or sparse) at a drawn magnitude, with a few hypothesis-drawn float32 values planted in it, so
examples span subnormal-to-huge ranges and shrink to small planted values.

Tolerances: with a power-of-two scale, multiplying and dividing by it are exact, so the RNE bound
2^-(m+1) holds exactly. Without pow2, ``x * scale`` and ``codes / scale`` are each rounded to
float32 (relative error <= 2^-24 each), so the bound gets a 2^-22 allowance.
"""

import pytest
import torch

from fp8ref.harness.stack.install import needs_package
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.delayed import DelayedScaling, te_scale
from fp8ref.reference.formats import E4M3FN, select
from fp8ref.reference.quantize import quantize, quantize_with_scale
from fp8ref.reference.scaling import amax, axiswise, block, expand_scale, mx, tensorwise, tile

# Every test here is built by hypothesis's decorators when the module loads, so without hypothesis
# the module itself skips (the needs marker's wording; nothing errors at collection).
hypothesis = pytest.importorskip("hypothesis", reason=needs_package("hypothesis", "this module"))
given, st = hypothesis.given, hypothesis.strategies

SHAPE = (16, 64)
# every MX element format (FP8, FP6, FP4): the properties hold for each with its own max and mantissa
FMTS = list(select(mx_element=True))
# small tiles and blocks keep examples fast; the grouping code is size-generic
GRANS = [tensorwise(), axiswise(-1), axiswise(0), tile(16), block(8), mx(32, "floor"), mx(32, "rceil")]
NON_MX = [g for g in GRANS if g.kind != "mx"]
SLACK = 2.0**-22


@st.composite
def tensors(draw, shape=SHAPE):
    seed = draw(st.integers(0, 2**31 - 1))
    log2_mag = draw(st.integers(-40, 40))
    dist = draw(st.sampled_from(["normal", "uniform", "lognormal", "sparse"]))
    gen = torch.Generator().manual_seed(seed)
    if dist == "normal":
        x = torch.randn(shape, generator=gen)
    elif dist == "uniform":
        x = torch.rand(shape, generator=gen) * 2 - 1
    elif dist == "lognormal":  # about 2^-17 .. 2^17 inside one tensor
        x = torch.exp(torch.randn(shape, generator=gen) * 4) * torch.sign(torch.randn(shape, generator=gen))
    else:
        x = torch.randn(shape, generator=gen) * (torch.rand(shape, generator=gen) < 0.05)
    x = x * 2.0**log2_mag
    planted = draw(
        st.lists(st.floats(min_value=-(2.0**100), max_value=2.0**100, allow_nan=False, width=32), max_size=6)
    )
    flat = x.reshape(-1)
    for i, v in enumerate(planted):
        flat[(seed + 7919 * i) % flat.numel()] = v
    return flat.reshape(shape)


def _scaled(x, q):
    """What quantize casts: float32(x) * expanded scale."""
    return x.float() * expand_scale(q.scale, q.granularity, x.shape)


def _bound(fmt, exact):
    return 2.0 ** -(fmt.man_bits + 1) + (0.0 if exact else SLACK)


@given(x=tensors(), fmt=st.sampled_from(FMTS), g=st.sampled_from(GRANS), pow2=st.booleans())
def test_scaled_round_trip_relative_error_is_at_most_half_ulp_in_the_normal_range(x, fmt, g, pow2):
    q = quantize(x, fmt, g, pow2=pow2)
    y = _scaled(x, q)
    dq = q.dequantize(torch.float32)
    normal = (y.abs() >= fmt.min_normal) & (y.abs() <= fmt.max)
    rel = ((dq - x).abs() / x.abs())[normal]
    exact = pow2 or g.kind == "mx"
    assert rel.numel() == 0 or rel.max().item() <= _bound(fmt, exact), (
        f"{fmt} {g} pow2={pow2}: max relative error {rel.max().item()} > {_bound(fmt, exact)}"
    )


# The delayed scale is TransformerEngine's float32 arithmetic, three roundings to nearest
# (``delayed.te_scale``: r = f32(1 / amax), s = f32(r * max); then quantize's y = f32(x * s)), each
# within a relative 2^-24. With |x| <= amax: |y| <= max * (1 + 2^-24)^3 < max * (1 + 3 * 2^-24 + 2^-46),
# i.e. for E4M3FN (float32 ulp 2^-15 at 448) at most 448 + 2.625 ulps: the float32 448 + 2 * 2^-15,
# which RNE still takes to 448 (overflow starts at 464). A product two ulps over is reached (amax
# 0x43dec7cf), so one ulp is not a bound.
DELAYED_SCALED_MAX = E4M3FN.max + 2 * 2.0**-15


def test_the_delayed_bound_is_reached_and_still_rounds_to_max():
    a = torch.tensor([0x43DEC7CF], dtype=torch.int32).view(torch.float32)
    y = a * te_scale(a, torch.ones(()), E4M3FN)
    assert y.item() == DELAYED_SCALED_MAX
    assert decode(encode(y, E4M3FN), E4M3FN).item() == E4M3FN.max


@given(
    x=tensors(),
    hist=st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=8),
    algo=st.sampled_from(["max", "most_recent"]),
)
def test_delayed_scale_whose_history_holds_this_amax_meets_the_same_bound(x, hist, algo):
    ds = DelayedScaling(E4M3FN, history_len=len(hist) + 1, algo=algo)
    for a in hist:
        ds.update(a)
    ds.update(amax(x, tensorwise()))  # fresh: the window now includes this tensor
    q = quantize_with_scale(x, ds.scale, E4M3FN)
    y = _scaled(x, q)
    assert y.abs().max().item() <= DELAYED_SCALED_MAX, f"history {hist}: {y.abs().max().item()!r}"
    normal = (y.abs() >= E4M3FN.min_normal) & (y.abs() <= E4M3FN.max)
    rel = ((q.dequantize() - x).abs() / x.abs())[normal]
    assert rel.numel() == 0 or rel.max().item() <= _bound(E4M3FN, False)


@given(x=tensors(), fmt=st.sampled_from(FMTS), g=st.sampled_from(NON_MX + [mx(32, "rceil")]), pow2=st.booleans())
def test_current_scaling_never_overflows(x, fmt, g, pow2):
    q = quantize(x, fmt, g, pow2=pow2)
    y = _scaled(x, q)
    assert not torch.isnan(q.values()).any() and not torch.isinf(q.values()).any()
    # no element overflows in the RNE sense (at most a float32 ulp above max, which rounds to max)
    assert torch.equal(encode(y, fmt, saturate=True), encode(y, fmt, saturate=False)), f"{fmt} {g}"
    if pow2 or g.kind == "mx":
        assert y.abs().max().item() <= fmt.max  # exact scales: not even one ulp over


@given(x=tensors(), fmt=st.sampled_from(FMTS), g=st.sampled_from(NON_MX))
def test_pow2_scales_multiply_and_dequantize_exactly(x, fmt, g):
    q = quantize(x, fmt, g, pow2=True)
    mant, _ = torch.frexp(q.scale)
    assert bool((mant == 0.5).all()), "scale is not a power of two"
    s = expand_scale(q.scale, g, x.shape)
    y = x * s
    normal32 = y.abs() >= 2.0**-126  # below that float32 itself is subnormal and drops bits
    assert torch.equal((y / s)[normal32], x[normal32])
    assert torch.equal(q.dequantize(torch.float32) * s, q.values())


@given(x=tensors(), fmt=st.sampled_from(FMTS), g=st.sampled_from(GRANS))
def test_requantizing_dequantized_values_with_pow2_scales_changes_no_value(x, fmt, g):
    """Values are a fixed point. Codes are too, except where the scale itself moves: see
    test_requantizing_can_double_a_pow2_scale for the case where it does."""
    q1 = quantize(x, fmt, g, pow2=True)
    d1 = q1.dequantize(torch.float32)
    q2 = quantize(d1, fmt, g, pow2=True)
    assert torch.equal(q2.dequantize(torch.float32), d1)
    same_scale = expand_scale(q1.scale, g, x.shape) == expand_scale(q2.scale, g, x.shape)
    assert torch.equal(q2.codes[same_scale], q1.codes[same_scale])


def test_requantizing_can_double_a_pow2_scale():
    # The property "quantize(dequantize(quantize(x))) == quantize(x)" is false for codes:
    # 230 * 1 rounds down to 224 = 448/2 in E4M3, whose pow2 scale is 2, not 1. The values agree.
    x = torch.tensor([230.0])
    q1 = quantize(x, E4M3FN, pow2=True)
    q2 = quantize(q1.dequantize(), E4M3FN, pow2=True)
    assert (q1.scale.item(), q2.scale.item()) == (1.0, 2.0)
    assert not torch.equal(q1.codes, q2.codes) and torch.equal(q1.dequantize(), q2.dequantize())


NESTED = [
    (tensorwise(), axiswise(-1)),
    (tensorwise(), axiswise(0)),
    (axiswise(-1), tile(16)),
    (tile(16), tile(8)),
    (tensorwise(), block(8)),
    (block(8), tile(8)),
]


@given(x=tensors(), fmt=st.sampled_from(FMTS), pair=st.sampled_from(NESTED), pow2=st.booleans())
def test_finer_granularity_never_has_a_larger_error_bound(x, fmt, pair, pow2):
    coarse, fine = pair
    qc, qf = quantize(x, fmt, coarse, pow2=pow2), quantize(x, fmt, fine, pow2=pow2)
    sc, sf = expand_scale(qc.scale, coarse, x.shape), expand_scale(qf.scale, fine, x.shape)
    assert bool((sf >= sc).all()), f"{fine} has a smaller scale than {coarse} somewhere"
    # per-element bound: half an ulp relative in the normal range, half a subnormal step absolute below
    bound_c = torch.maximum(x.abs() * 2.0 ** -(fmt.man_bits + 1), (fmt.min_subnormal / 2) / sc.double())
    err_f = (qf.dequantize(torch.float32) - x).abs()
    slack = 0.0 if pow2 else SLACK
    assert bool((err_f <= bound_c * (1 + 2.0**-20) + x.abs() * slack).all())


@given(x=tensors(), fmt=st.sampled_from(FMTS), mode=st.sampled_from(["floor", "rceil"]))
def test_mx_scales_are_powers_of_two_and_floor_saturates_rceil_never_exceeds_max(x, fmt, mode):
    q = quantize(x, fmt, mx(32, mode))
    mant, _ = torch.frexp(q.scale_inv)
    assert bool((mant == 0.5).all())
    assert not bool((q.scale_e8m0 == 0xFF).any())
    y = _scaled(x, q)
    if mode == "rceil":
        assert y.abs().max().item() <= fmt.max
    else:
        assert y.abs().max().item() < 2.0 ** (fmt.emax + 1)
        over = y.abs() > fmt.max
        assert bool((q.values()[over].abs() == fmt.max).all()), "FLOOR overflow must saturate to max"
    assert not torch.isnan(q.values()).any()


def test_mx_floor_does_push_elements_past_max():
    x = torch.full((1, 32), 1.0)
    x[0, 0] = 1.9 * 2.0**5  # floor(log2) = 5 -> X = 2^-3 -> 1.9 * 2^8 = 486.4 > 448
    qf, qr = quantize(x, E4M3FN, mx(32, "floor")), quantize(x, E4M3FN, mx(32, "rceil"))
    assert _scaled(x, qf)[0, 0].item() > E4M3FN.max and qf.values()[0, 0].item() == E4M3FN.max
    assert _scaled(x, qr)[0, 0].item() <= E4M3FN.max


@given(
    hist=st.lists(st.floats(0.5, 2.0), min_size=2, max_size=16),
    factor=st.floats(2.0, 1e4),
    seed=st.integers(0, 2**31 - 1),
)
def test_delayed_scaling_saturates_a_spike_until_it_enters_the_window(hist, factor, seed):
    ds = DelayedScaling(E4M3FN, history_len=len(hist), algo="max")
    for a in hist:
        ds.update(a)
    x = torch.rand(1024, generator=torch.Generator().manual_seed(seed)) * 0.5
    spike = factor * max(hist)
    x[3] = spike
    bound = _bound(E4M3FN, False)
    delayed = quantize_with_scale(x, ds.scale, E4M3FN)
    assert delayed.values()[3].item() == E4M3FN.max  # saturated
    assert abs(delayed.dequantize()[3].item() - spike) / spike > bound
    current = quantize(x, E4M3FN)
    assert abs(current.dequantize()[3].item() - spike) / spike <= bound
    ds.update(amax(x, tensorwise()))  # the spike enters the window
    covered = quantize_with_scale(x, ds.scale, E4M3FN)
    assert abs(covered.dequantize()[3].item() - spike) / spike <= bound


@given(fmt=st.sampled_from(FMTS), g=st.sampled_from(GRANS), pow2=st.booleans())
def test_all_zero_input_quantizes_to_zero_with_finite_scales(fmt, g, pow2):
    q = quantize(torch.zeros(SHAPE), fmt, g, pow2=pow2)
    assert torch.isfinite(q.scale).all() and bool((q.scale > 0).all())
    assert torch.equal(q.dequantize(), torch.zeros(SHAPE))
