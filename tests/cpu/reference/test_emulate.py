"""fp8ref's own emulated FP8 linear under every recipe, its module and its converter."""

import pytest
import torch

from fp8ref.reference.codec import decode, encode
from fp8ref.reference.emulate import Fp8Linear, convert, fp8_linear
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.metrics import calc_diff, sqnr
from fp8ref.reference.recipes import FP4_RECIPES, RECIPES, GemmRecipe, OperandCast, get_recipe


def _data(seed=0, M=256, K=256, N=128):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(M, K, generator=gen), torch.randn(N, K, generator=gen) / 16, torch.randn(M, N, generator=gen))


def _against_high_precision(name):
    """The recipe's emulated linear and the float32 one, forward and backward on ``_data()``:
    ((y, grad_x, grad_w) emulated, (y, grad_x, grad_w) float32)."""
    x, w, g = _data()
    out = []
    for run in (lambda a, b: fp8_linear(a, b, recipe=name), lambda a, b: a @ b.t()):
        a, b = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = run(a, b)
        y.backward(g)
        out.append((y, a.grad, b.grad))
    return out


@pytest.mark.parametrize("name", sorted(set(RECIPES) - {"static", *FP4_RECIPES}))
def test_every_recipe_passes_deepgemms_check_against_high_precision(name, record_observation):
    (y, xr_grad, wr_grad), (yh, xh_grad, wh_grad) = _against_high_precision(name)
    d = calc_diff(y, yh)
    record_observation(
        f"fp8ref {name}: calc_diff(out) / SQNR out, grad_in, grad_w (dB)",
        f"{d:.2e} / {sqnr(y, yh):.1f}, {sqnr(xr_grad, xh_grad):.1f}, {sqnr(wr_grad, wh_grad):.1f}",
    )
    assert d < 1e-3  # DeepGEMM's acceptance for an FP8 GEMM
    assert sqnr(xr_grad, xh_grad) >= 17 and sqnr(wr_grad, wh_grad) >= 17


def _e4m3_cast(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """E4M3 values of ``t * scale`` (float32 product, clamped to +-448, rounded to nearest even by
    the codec), divided back by ``scale``: torchao's cast and dequantization (docs/design.md),
    written out from the codec so that ``emulate.cast_operand`` is not its own expected value."""
    y = (t.float() * scale).clamp(-E4M3FN.max, E4M3FN.max)
    return decode(encode(y, E4M3FN), E4M3FN).float() / scale


def _e4m3_tiles(t: torch.Tensor, k: int = 128) -> torch.Tensor:
    """DeepSeek-V3's 1 x k tiles along the last dim, each scaled by torchao's formula
    float32(448 / float64(amax)) (amax clamped at 1e-12), then ``_e4m3_cast``."""
    tiles = t.float().reshape(*t.shape[:-1], t.shape[-1] // k, k)
    amax = tiles.abs().amax(-1, keepdim=True)
    scale = (E4M3FN.max / amax.double().clamp(min=1e-12)).float()
    return _e4m3_cast(tiles, scale).reshape(t.shape)


def test_blockwise_grad_weight_uses_128x1_tiles_of_the_activation():
    """In grad_weight = grad_y^T @ x the contraction runs over tokens, so DeepSeek-V3's
    activation tiles there are 128 tokens x 1 channel: the operand x^T in 1x128 tiles."""
    x, w, g = _data()
    xr = x.clone().requires_grad_()
    wr = w.clone().requires_grad_()
    fp8_linear(xr, wr, recipe="blockwise").backward(g)
    want = _e4m3_tiles(g.t()) @ _e4m3_tiles(x.t()).t()
    assert torch.equal(wr.grad, want), f"grad_weight differs from 1x128 tiles of x^T in {int((wr.grad != want).sum())}"
    # and it is not what per-row (1x128 along channels) tiles of x would give
    wrong = _e4m3_tiles(g.t()) @ _e4m3_tiles(x)
    assert not torch.equal(wr.grad, wrong)


def test_static_recipe_uses_fixed_scales():
    """modded-nanogpt's static scales (fp8ref.reference.recipes): the input times 1/2, the weight
    times 1/32, each cast to E4M3 with saturation, no amax involved."""
    x, w, _ = _data()
    y = fp8_linear(x * 0 + 1000.0, w, recipe="static")  # 1000/2 = 500 saturates to 448 in E4M3
    xq = torch.full_like(x, 448.0 * 2)  # 448 / (1/2)
    wq = _e4m3_cast(w, torch.tensor(1 / 32.0))
    assert torch.equal(y, xq @ wq.t()), f"{int((y != xq @ wq.t()).sum())} outputs differ from 896 x W_e4m3(w/32)^T"


def test_recipes_describe_every_gemm_and_reject_mixed_precision():
    d = RECIPES["rowwise_with_gw_hp"].describe()
    assert d["grad_weight.a"] == "high-precision" and d["grad_input.b"] == "e4m3fn tensorwise pow2"
    assert RECIPES["blockwise"].describe()["output.b"] == "e4m3fn 128x128"
    with pytest.raises(ValueError, match="both operands"):
        GemmRecipe(OperandCast(E4M3FN), OperandCast(None))
    with pytest.raises(ValueError, match="recipe: expected one of"):
        get_recipe("fp4")


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 128)
        self.odd = torch.nn.Linear(128, 40)  # 40 is not a multiple of 16
        self.lm_head = torch.nn.Linear(40, 64)


def test_convert_swaps_filtered_linears_and_shares_parameters():
    net = _Net()
    w = net.up.weight
    convert(net, "rowwise")
    assert isinstance(net.up, Fp8Linear) and net.up.weight is w and net.up.recipe.name == "rowwise"
    assert type(net.odd) is torch.nn.Linear and type(net.lm_head) is torch.nn.Linear
    x = torch.randn(8, 64)
    assert torch.equal(net.up(x), fp8_linear(x, w, net.up.bias, "rowwise"))
    with pytest.raises(TypeError, match="model: expected an nn.Module"):
        convert("model")
    with pytest.raises(TypeError, match="mod: expected an nn.Linear"):
        Fp8Linear.from_linear(torch.nn.ReLU())


def test_fp4_recipes_report_sqnr_and_nvfp4_beats_mxfp4(record_observation):
    """Emulated MXFP4 and NVFP4 linears, forward and backward, against high precision. E2M1
    rounds a normal element with at most 20% relative error (half a step of 0.5 at 1.25), i.e.
    >= 14 dB per cast operand; two operands per GEMM and subnormal elements take a few dB more, so
    10 dB is the floor asserted. NVFP4 (blocks of 16, non-power-of-two scales) must not be worse
    than MXFP4 (blocks of 32, power-of-two scales) on any of the three outputs."""
    got = {}
    for name in FP4_RECIPES:
        torch.manual_seed(0)  # the gradients' stochastic rounding
        emulated, exact = _against_high_precision(name)
        got[name] = tuple(sqnr(e, h) for e, h in zip(emulated, exact))
        record_observation(f"fp8ref {name}: SQNR out, grad_in, grad_w (dB)", ", ".join(f"{v:.1f}" for v in got[name]))
        assert min(got[name]) >= 10, f"{name}: {got[name]}"
    assert all(n >= m for n, m in zip(got["nvfp4"], got["mxfp4"])), got


def test_fp4_recipes_describe_their_operands():
    d = RECIPES["nvfp4"].describe()
    assert d["output.a"] == "e2m1fn nvfp4 1x16 two-level" and d["grad_input.a"] == "e2m1fn nvfp4 1x16 two-level sr"
    assert RECIPES["mxfp4"].describe()["grad_weight.b"] == "e2m1fn mx32-floor"
