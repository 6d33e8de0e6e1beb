"""NVFP4 (E2M1 in 1x16 blocks, UE4M3 block scales, optional FP32 per-tensor scale): the reference
against its definition, then torchao's nvfp4_quantize / NVFP4Tensor against the reference, bitwise."""

import pytest
import torch

from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.reference import nvfp4
from fp8ref.reference.codec import decode, encode, unpack_fp4
from fp8ref.reference.formats import E2M1FN, UE4M3


def _inputs(dtype=torch.float32, rows=16):
    """Blocks over a wide dynamic range, plus the edges: an all-zero block, a block far below
    the smallest block scale (amax < 6 * 2^-6), a block at the tensor's amax."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(rows, 256, generator=g) * torch.exp2(
        torch.randint(-12, 12, (rows, 16), generator=g).float()
    ).repeat_interleave(16, dim=1)
    x[0, :16] = 0.0
    x[1, 16:32] = torch.linspace(-1, 1, 16) * 2.0**-12
    return x.to(dtype)


def test_per_tensor_scale_puts_the_largest_block_at_e4m3_max():
    """Derived from the format: the block holding the tensor's amax gets block scale
    (amax / 6) / g = 448, the largest UE4M3 value, when g = amax / (6 * 448)."""
    for amax in (1e-3, 0.37, 1.0, 3.0, 448.0, 6e4, 1.7e10):
        x = torch.zeros(1, 32)
        x[0, 5] = amax
        q = nvfp4.quantize(x, nvfp4.per_tensor_scale(torch.tensor(amax)))
        assert int(q.block_scale[0, 0]) == UE4M3.max_code, f"amax {amax}: block scale {q.block_scale[0, 0]}"
        assert decode(q.codes, E2M1FN)[0, 5].item() == E2M1FN.max


def test_single_level_scale_is_the_block_amax_over_six_in_ue4m3():
    x = _inputs()
    q = nvfp4.quantize(x)
    amax_b = x.reshape(16, 16, 16).abs().amax(-1)
    s = decode(q.block_scale, UE4M3)
    # the stored scale is the UE4M3 value nearest to amax/6 (clamped to [2^-6, 448])
    target = (amax_b / 6).clamp(nvfp4.MIN_SCALE, UE4M3.max)
    vals = decode(torch.arange(UE4M3.max_code + 1, dtype=torch.uint8), UE4M3)
    nearest = (target.unsqueeze(-1) - vals).abs().min(-1).values
    assert torch.equal((s - target).abs(), nearest), "a block scale is not the nearest UE4M3 value"
    assert float(s[0, 0]) == nvfp4.MIN_SCALE and float(s[1, 1]) == nvfp4.MIN_SCALE  # zero / tiny blocks


def test_dequantize_error_is_within_half_an_e2m1_step_of_the_block_scale():
    """Each element: |x - value(q) * s| <= (half E2M1's spacing at value(q)) * s, or the element
    saturated (|x| / s above 6: a block scale rounded down)."""
    x = _inputs()
    for g in (None, nvfp4.per_tensor_scale(x.abs().amax())):
        q = nvfp4.quantize(x, g)
        s = q.scales().repeat_interleave(16, dim=-1)
        v = decode(q.codes, E2M1FN)
        step = torch.where(v.abs() < 2, 0.5, torch.where(v.abs() < 4, 1.0, 2.0))
        err = (x - q.dequantize(torch.float32)).abs()
        ok = (err <= step / 2 * s * (1 + 2**-20)) | ((x.abs() / s > 6) & (v.abs() == 6))
        assert bool(ok.all()), f"{int((~ok).sum())} elements outside half a step (two-level: {g is not None})"


def test_a_nan_block_carries_nan_in_its_scale():
    x = torch.ones(2, 32)
    x[0, 3] = float("nan")
    q = nvfp4.quantize(x)
    one_sixth = int(encode(torch.tensor([1 / 6]), UE4M3)[0])  # an all-ones block: amax 1 over E2M1's 6
    assert q.block_scale[0].tolist() == [UE4M3.canonical_nan_code, one_sixth]
    assert not bool(q.codes[0, :16].any())
    d = q.dequantize(torch.float32)
    assert bool(torch.isnan(d[0, :16]).all()) and not bool(torch.isnan(d[0, 16:]).any())


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4.quantize(torch.ones(3, 24))
    with pytest.raises(ValueError, match="tensor_scale: expected one value"):
        nvfp4.quantize(torch.ones(2, 16), torch.ones(2))
    with pytest.raises(TypeError, match="x"):
        nvfp4.quantize(torch.ones(2, 16, dtype=torch.float64))
    with pytest.raises(ValueError, match="min_scale"):
        nvfp4.quantize(torch.ones(2, 16), min_scale=0)
    with pytest.raises(ValueError, match="level"):
        nvfp4.quantize_current(torch.ones(2, 16), "three")


def test_packed_is_two_codes_per_byte():
    q = nvfp4.quantize(_inputs())
    assert q.packed().shape == (16, 128) and torch.equal(unpack_fp4(q.packed()), q.codes)


# --- torchao -------------------------------------------------------------------------------
LEVELS = ["single", "two"]


def _tensor_scale(x, level):
    return nvfp4.per_tensor_scale(x.float().abs().amax()) if level == "two" else None


@pytest.mark.needs("torchao")
def test_torchao_per_tensor_scale_is_the_derived_one():
    rand = torch.rand(1000, generator=torch.Generator().manual_seed(0)) * 1e4
    amax = torch.cat([torch.exp2(torch.linspace(-60, 60, 1201)), rand])
    assert torch.equal(ao.nvfp4_per_tensor_scale(amax), nvfp4.per_tensor_scale(amax))


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_torchao_nvfp4_quantize_is_bitwise_the_reference(dtype, level):
    x = _inputs(dtype)
    g = _tensor_scale(x, level)
    scale, data = ao.nvfp4_quantize(x, g)
    q = nvfp4.quantize(x, g)
    assert torch.equal(scale, q.block_scale), f"{int((scale != q.block_scale).sum())} block scales differ"
    assert torch.equal(data, q.packed()), f"{int((data != q.packed()).sum())} packed bytes differ"


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("level", LEVELS)
def test_torchao_nvfp4tensor_dequantizes_like_the_reference(level):
    x = _inputs()
    g = _tensor_scale(x, level)
    theirs = ao.nvfp4_dequantize(x, g, torch.float32)
    ours = nvfp4.quantize(x, g).dequantize(torch.float32)
    assert torch.equal(theirs, ours), f"{int((theirs != ours).sum())} elements differ"


def test_nvfp4_granularity_is_not_a_quantize_scale():
    from fp8ref.reference.quantize import quantize
    from fp8ref.reference.scaling import amax, compute_scale
    from fp8ref.reference.scaling import nvfp4 as nvfp4_granularity

    g = nvfp4_granularity()
    assert str(g) == "nvfp4 1x16 two-level" and amax(torch.ones(2, 32), g).shape == (2, 2)
    with pytest.raises(ValueError, match="fp8ref.reference.nvfp4.quantize"):
        compute_scale(torch.ones(2, 32), E2M1FN, g)
    with pytest.raises(ValueError, match="fp8ref.reference.nvfp4.quantize"):
        quantize(torch.ones(2, 32), E2M1FN, g)


def test_mx_fp4_nan_block_and_static_nan():
    """MXFP4: a block holding NaN gets the E8M0 NaN scale and element codes 0 (E2M1 has no NaN);
    a NaN under a finite static scale has nowhere to go and is refused."""
    from fp8ref.reference.quantize import quantize, quantize_with_scale
    from fp8ref.reference.scaling import mx

    x = torch.ones(1, 64)
    x[0, 1] = float("nan")
    q = quantize(x, E2M1FN, mx(32))
    assert q.scale_e8m0.tolist() == [[0xFF, 127 - 2]] and not bool(q.codes[0, :32].any())
    with pytest.raises(ValueError, match="no NaN"):
        quantize_with_scale(x, 1.0, E2M1FN)
    with pytest.raises(ValueError, match="rounds to nearest only"):
        quantize_with_scale(torch.ones(4), 1.0, "e4m3fn", cast="native", rounding="sr")


def test_the_two_single_level_divisions_part_at_an_e2m1_tie():
    """Scale 3.75 (amax 22.5): 18.75 / 3.75 = 5 exactly, a tie between 4 and 6 that RNE sends to
    4; 18.75 * float32(1 / 3.75) is just above 5 and goes to 6."""
    x = torch.zeros(1, 16)
    x[0, :2] = torch.tensor([22.5, 18.75])
    divide = nvfp4.quantize(x, division="divide").dequantize(torch.float32)[0, :2].tolist()
    reciprocal = nvfp4.quantize(x, division="reciprocal").dequantize(torch.float32)[0, :2].tolist()
    assert divide == [22.5, 15.0] and reciprocal == [22.5, 22.5]
    with pytest.raises(ValueError, match="division: 'divide' is the single-level"):
        nvfp4.quantize(x, torch.tensor(1.0), division="divide")
    with pytest.raises(ValueError, match="division: expected one of"):
        nvfp4.quantize(x, division="round")
