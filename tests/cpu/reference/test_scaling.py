"""Scale formulas, shapes and special amax values (zeros, subnormal amax, inf, NaN), checked
against values worked out from the documented formulas (torchao, TransformerEngine, OCP MX)."""

import math

import pytest
import torch

from fp8ref.reference.codec import decode
from fp8ref.reference.formats import E2M1FN, E4M3FN, E5M2, E8M0FNU
from fp8ref.reference.quantize import Quantized, dequantize, quantize, quantize_with_scale
from fp8ref.reference.scaling import (
    EPS,
    Granularity,
    amax,
    amax_to_scale,
    axiswise,
    block,
    compute_scale,
    expand_scale,
    from_scale_inv,
    mx,
    mx_scale_exponent,
    nvfp4,
    round_down_to_pow2,
    scale_shape,
    tensorwise,
    tile,
    to_scale_inv,
)

F32 = torch.float32


def test_tensorwise_scale_is_torchaos_formula():
    # torchao: float32(448 / float64(amax)); 448/3 is not a float32, so the float64 division
    # and a single rounding to float32 matter
    s = amax_to_scale(torch.tensor(3.0), E4M3FN)
    assert s.dtype == F32 and s.item() == torch.tensor(448 / 3, dtype=torch.float64).float().item()
    assert amax_to_scale(torch.tensor(3.0), E5M2).item() == torch.tensor(57344 / 3, dtype=torch.float64).float().item()


def test_pow2_rounds_down_exactly():
    s = amax_to_scale(torch.tensor([3.0, 448.0, 449.0, 1.0]), E4M3FN, pow2=True)
    assert s.tolist() == [128.0, 1.0, 0.5, 256.0]
    # just below a power of two: a float32 log2 would round up to the power; the exact floor does not
    below = torch.nextafter(torch.tensor(4.0), torch.tensor(0.0))
    assert round_down_to_pow2(below).item() == 2.0
    assert round_down_to_pow2(torch.tensor([0.0, math.inf, math.nan])).tolist()[:2] == [0.0, math.inf]


def test_margin_divides_by_two_to_the_margin():
    # TransformerEngine: scale = (fp8_max / amax) / 2^margin
    assert amax_to_scale(torch.tensor(7.0), E4M3FN, margin=2).item() == pytest.approx(448 / 7 / 4, rel=2**-24)


def test_zero_amax_uses_the_eps_clamp():
    s = amax_to_scale(torch.tensor(0.0), E4M3FN)
    assert s.item() == torch.tensor(448 / EPS, dtype=torch.float64).float().item()
    q = quantize(torch.zeros(4), E4M3FN)
    assert torch.equal(q.codes, torch.zeros(4, dtype=torch.uint8)) and torch.equal(q.dequantize(), torch.zeros(4))


def test_subnormal_amax_stays_finite_thanks_to_eps():
    # without the clamp 448 / 1e-40 would overflow float32 to inf, and 0 * inf is NaN
    x = torch.tensor([1e-40, 0.0, -5e-41])
    q = quantize(x, E4M3FN)
    assert torch.isfinite(q.scale) and q.scale.item() == torch.tensor(448 / EPS, dtype=torch.float64).float().item()
    assert not torch.isnan(q.values()).any()


def test_inf_and_nan_inputs_give_degenerate_scales():
    # documented in fp8ref.reference.scaling: amax inf -> scale 0; amax NaN -> scale NaN (current scaling has
    # nothing to fall back on; delayed scaling keeps the previous scale instead)
    assert amax_to_scale(torch.tensor(math.inf), E4M3FN).item() == 0.0
    assert math.isnan(amax_to_scale(torch.tensor(math.nan), E4M3FN).item())
    q = quantize(torch.tensor([1.0, math.inf]), E4M3FN)
    assert q.scale.item() == 0.0
    assert q.values()[0].item() == 0.0 and math.isnan(q.values()[1].item())  # 1*0 = 0 but inf*0 = NaN
    assert torch.isnan(q.dequantize()).all()  # and dequantizing divides by the zero scale
    assert torch.isnan(amax(torch.tensor([1.0, math.nan]), tensorwise()))


def test_amax_shapes_per_granularity():
    x = torch.arange(4 * 256, dtype=F32).reshape(4, 256) - 500
    assert amax(x, tensorwise()).shape == ()
    assert amax(x, axiswise(-1)).shape == (4, 1) and amax(x, axiswise(0)).shape == (1, 256)
    assert amax(x, tile(128)).shape == (4, 2)
    assert amax(x.reshape(8, 128), block(4)).shape == (2, 32)
    assert amax(x, mx()).shape == (4, 8)
    assert amax(x, tile(128))[0].tolist() == [500.0, 372.0]  # |0-500|, |128-500|
    assert amax(torch.empty(0), tensorwise()).item() == 0.0


@pytest.mark.parametrize("shape", [(), (6,), (4, 256), (2, 3, 64), (256, 128)])
def test_scale_shape_is_the_shape_amax_returns(shape):
    """scale_shape is worked out from the shape alone; amax reduces real data: they must agree
    for every granularity the shape admits, and refuse the same shapes."""
    x = torch.ones(shape)
    grans = [tensorwise(), mx(32), nvfp4(), tile(32), block(64), block(2)] + [axiswise(d) for d in (-1, 0, 1, 2)]
    for g in grans:
        try:
            want = amax(x, g).shape
        except ValueError as exc:
            with pytest.raises(ValueError, match=str(exc).split(":")[0]):
                scale_shape(g, shape)
            continue
        assert scale_shape(g, torch.Size(shape)) == want, (str(g), shape)
    with pytest.raises(TypeError, match="shape: expected a sequence of ints"):
        scale_shape(tensorwise(), "4x4")


def test_block_amax_covers_the_whole_block():
    x = torch.zeros(4, 4)
    x[1, 0], x[2, 3] = -9.0, 7.0
    assert amax(x, block(2)).tolist() == [[9.0, 0.0], [0.0, 7.0]]


def test_expand_scale_matches_groups():
    s = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    e = expand_scale(s, block(2), torch.Size([4, 4]))
    assert e[0, :2].tolist() == [1.0, 1.0] and e[3, 3].item() == 4.0 and e[1, 2].item() == 2.0
    e = expand_scale(torch.tensor([[1.0, 2.0]]), tile(3), torch.Size([1, 6]))
    assert e.tolist() == [[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]]


@pytest.mark.parametrize(
    "g,shape",
    [(tile(128), (4, 100)), (block(128), (128, 200)), (block(4), (6,)), (mx(32), (3, 31)), (axiswise(2), (4, 4))],
)
def test_shapes_that_do_not_divide_raise(g, shape):
    with pytest.raises(ValueError, match="multiple|out of range"):
        amax(torch.ones(shape), g)


@pytest.mark.parametrize(
    "mode,amax_,e",
    [
        # FLOOR: floor(log2 amax) - 8 for E4M3 elements
        ("floor", 448.0, 0),
        ("floor", 511.0, 0),
        ("floor", 512.0, 1),
        ("floor", 1.0, -8),
        # RCEIL: ceil(log2(amax / 448))
        ("rceil", 448.0, 0),
        ("rceil", 449.0, 1),
        ("rceil", 224.0, -1),
        ("rceil", 225.0, 0),
        ("rceil", 1.0, -8),
        # CEIL: ceil(log2 amax) - 8
        ("ceil", 256.0, 0),
        ("ceil", 257.0, 1),
        ("ceil", 448.0, 1),
        ("ceil", 1.0, -8),
        # EVEN: amax rounded to 3 fraction bits first; 1.9375 = 2 - 2^-4 is the tie, which goes up
        ("even", 480.0, 0),  # 1.875 x 2^8 is on the grid
        ("even", 495.0, 0),  # 1.93359375 x 2^8, just under the tie
        ("even", 496.0, 1),  # 1.9375 x 2^8: the tie
        ("even", 1.0, -8),
        # extremes clamp to E8M0's range; amax 0 takes the smallest scale
        ("floor", 0.0, -127),
        ("rceil", 0.0, -127),
        ("ceil", 0.0, -127),
        ("even", 0.0, -127),
        ("ceil", 3e38, 120),
        ("floor", 1e-45, -127),
        ("floor", 3e38, 119),
    ],
)
def test_mx_scale_exponent(mode, amax_, e):
    assert mx_scale_exponent(torch.tensor([amax_]), E4M3FN, mode).item() == e


def test_mx_even_rounds_amax_to_the_element_formats_significand():
    # E2M1 keeps 1 fraction bit: 1.75 = 2 - 2^-2 is the tie; E5M2 keeps 2: the tie is 1.875
    assert mx_scale_exponent(torch.tensor([6.0, 6.99, 7.0]), E2M1FN, "even").tolist() == [0, 0, 1]
    assert mx_scale_exponent(torch.tensor([2.0**15 * 1.874, 2.0**15 * 1.875]), E5M2, "even").tolist() == [0, 1]


def test_mx_e5m2_uses_emax_15():
    assert mx_scale_exponent(torch.tensor([2.0**15]), E5M2, "floor").item() == 0
    assert mx_scale_exponent(torch.tensor([57345.0]), E5M2, "rceil").item() == 1


def test_mx_non_finite_amax_gives_nan_scale():
    e = mx_scale_exponent(torch.tensor([math.inf, math.nan]), E4M3FN)
    assert torch.isnan(e).all()
    q = quantize(torch.tensor([[math.inf] + [1.0] * 31]), E4M3FN, mx())
    assert q.scale_e8m0.tolist() == [[0xFF]]


def test_mx_container_exposes_e8m0_scales():
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(0))
    q = quantize(x, E4M3FN, mx(32, "rceil"))
    e = mx_scale_exponent(amax(x, mx()), E4M3FN, "rceil")
    assert torch.equal(q.scale_e8m0.int(), (e + 127).int())
    assert torch.equal(decode(q.scale_e8m0, E8M0FNU), q.scale_inv)
    with pytest.raises(ValueError, match="only MX"):
        _ = quantize(x, E4M3FN).scale_e8m0


def test_te_scale_inv_round_trip():
    s = torch.tensor([256.0, 0.5, 448 / 3])
    assert torch.equal(to_scale_inv(s), 1 / s)
    assert torch.equal(from_scale_inv(to_scale_inv(s[:2])), s[:2])  # exact for powers of two
    q = quantize(torch.tensor([1.0, 2.0]), E4M3FN, pow2=True)
    assert torch.equal(q.scale_inv, to_scale_inv(q.scale))


def test_quantize_follows_torchaos_clamp_then_cast():
    x = torch.tensor([1.0, -3.0, 1000.0])
    q = quantize_with_scale(x, torch.tensor(1.0), E4M3FN)  # static scale 1: 1000 clamps to 448
    assert q.values().tolist() == [1.0, -3.0, 448.0]
    assert dequantize(q).dtype == F32 and dequantize(q, torch.bfloat16).dtype == torch.bfloat16


def test_static_scaling_like_modded_nanogpt():
    # modded-nanogpt divides by x_s = 2.0 (torchao scale 0.5) and w_s = 32.0 before the cast
    x = torch.tensor([1.0, 104.0, 900.0, 1000.0])
    q = quantize_with_scale(x, 1 / 2.0, E4M3FN)
    assert q.values().tolist() == [0.5, 52.0, 448.0, 448.0]  # 900/2 = 450 -> 448; 1000/2 saturates
    assert q.dequantize().tolist() == [1.0, 104.0, 896.0, 896.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_codec_and_native_cast_switch_agree(dtype):
    x = (torch.randn(64, 64, generator=torch.Generator().manual_seed(1)) * 30).to(dtype)
    for g in (tensorwise(), axiswise(-1), tile(32), block(32), mx()):
        a, b = quantize(x, E4M3FN, g, cast="codec"), quantize(x, E4M3FN, g, cast="native")
        assert torch.equal(a.codes, b.codes), str(g)


def test_bad_arguments_raise_clear_errors():
    x = torch.ones(4, 4)
    with pytest.raises(TypeError, match="granularity: expected a Granularity"):
        amax(x, "rowwise")
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        amax([1.0], tensorwise())
    with pytest.raises(TypeError, match="x: expected a floating-point"):
        amax(torch.ones(2, dtype=torch.int32), tensorwise())
    with pytest.raises(ValueError, match="kind: expected"):
        Granularity("rowwise")
    with pytest.raises(ValueError, match="mx_mode"):
        mx(32, "round")
    with pytest.raises(ValueError, match="size: expected a positive int"):
        tile(0)
    with pytest.raises(ValueError, match="eps: expected a positive"):
        amax_to_scale(torch.tensor(1.0), E4M3FN, eps=0)
    with pytest.raises(TypeError, match="pow2: expected a bool"):
        amax_to_scale(torch.tensor(1.0), E4M3FN, pow2=1)
    with pytest.raises(ValueError, match="cast: expected one of \\('codec', 'native'\\)"):
        quantize(x, E4M3FN, cast="fast")
    with pytest.raises(TypeError, match="q: expected an Quantized"):
        dequantize(x)
    with pytest.raises(TypeError, match="scale: expected a tensor or a number"):
        quantize_with_scale(x, "1", E4M3FN)
    with pytest.raises(ValueError, match="mode: expected"):
        mx_scale_exponent(torch.tensor(1.0), E4M3FN, "round")
    assert isinstance(quantize(x, "e4m3fn"), Quantized)
    assert compute_scale(x, E4M3FN).shape == ()


def test_scales_of_float32_subnormal_values_follow_their_formulas():
    """Where the codec once misread float32 subnormals, the scale formulas must not: power-of-two
    rounding of a subnormal scale, and MX exponents of a subnormal amax (FLOOR and RCEIL), both
    exact, checked against exact float64 arithmetic."""
    bits = torch.tensor([1, 0x00012345, 0x00400000, 0x00400001, 0x005FFFFF, 0x007FFFFF], dtype=torch.int32)
    v = bits.view(torch.float32)
    want = torch.exp2(
        torch.floor(torch.log2(v.double()))
    )  # exact: log2 of these doubles is exact or far from an integer
    assert torch.equal(round_down_to_pow2(v).double(), want)
    for mode in ("floor", "rceil"):
        e = mx_scale_exponent(v, E4M3FN, mode).double()
        floor_e = torch.floor(torch.log2(v.double())) - E4M3FN.emax
        exact = floor_e + (v.double() > E4M3FN.max * torch.exp2(floor_e)).double() if mode == "rceil" else floor_e
        assert torch.equal(e, exact.clamp(-127, 127)), (mode, e.tolist(), exact.tolist())
