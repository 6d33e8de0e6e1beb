"""torchao's Float8Linear (eager, compiled), a torch.library FP8 custom op and a small model
against fp8ref's emulation, on CPU; compiled forward+backward against eager and the weight cast
after optimizer steps also on CUDA (tests/gpu/test_torchao_linear.py has the GPU-only tests).

Tolerances, where the comparison is not bitwise, come from where the two computations round
differently (stated at each test): never a blanket rtol.
"""

import copy
import dataclasses
import functools

import pytest
import torch

from fp8ref.harness.ao import float8_linear as f8l
from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.harness.ao.float8_linear import fwd_bwd, gemm_operand_mismatches, torchao_convert
from fp8ref.harness.gemm.gemm_probes import half_ulp
from fp8ref.harness.stack import probes
from fp8ref.reference.emulate import Fp8Linear, convert, emulated_gemm
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.metrics import sqnr
from fp8ref.reference.quantize import quantize
from fp8ref.reference.recipes import RECIPES, TORCHAO_RECIPES
from fp8ref.reference.scaling import axiswise, tensorwise
from tests.common.params import on_devices

pytestmark = [pytest.mark.needs("torchao")]
# the tests whose CPU and CUDA bodies are the same run on both (tests/README.md, "A device")
ON_DEVICES = on_devices(pytest.mark.sm(89, "FP8 tensor cores"))

U_OUT = {d: half_ulp(d) for d in (torch.bfloat16, torch.float16, torch.float32)}  # relative


# --- Float8Linear ---------------------------------------------------------------------------
AO_RECIPES = list(TORCHAO_RECIPES)


def _pair(recipe, emulate, dtype, bias, seed=0):
    torch.manual_seed(seed)
    lin = torch.nn.Linear(128, 64, bias=bias).to(dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(4, 16, 128, generator=gen).to(dtype)
    g = torch.randn(4, 16, 64, generator=gen).to(dtype)
    ours = Fp8Linear.from_linear(copy.deepcopy(lin), recipe)
    return fwd_bwd(torchao_convert(lin, recipe, emulate), x, g), fwd_bwd(ours, x, g), (lin, x, g)


def _diff(a, b):
    return f"max |diff| {(a.float() - b.float()).abs().max().item():.3e}, SQNR {sqnr(a, b):.1f} dB"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("recipe", AO_RECIPES)
def test_emulated_float8linear_is_bitwise_equal_without_bias(recipe, dtype):
    """torchao's emulate=True dequantizes to float32 and calls torch.mm, which is what fp8ref's
    reference does: every FP8 GEMM's output and gradient must match bit for bit.

    The one high-precision GEMM (rowwise_with_gw_hp's grad_weight) torchao runs as a matmul in the
    parameter dtype, fp8ref in float32 then rounded. Both are exact products accumulated in float32
    (in the kernel's order) and rounded once, so they agree to within one rounding of the output
    each plus the float32 accumulation error of either order, with u half an ulp of the dtype and
    m = sum|g||x|: |torchao - fp8ref| <= 2u|y| + 2 (K + 1) 2^-24 m. Bitwise equality there depends
    on the CPU's bfloat16 kernel (AMX or AVX-512 accumulate in different orders)."""
    theirs, ours, (lin, x, g) = _pair(recipe, True, dtype, bias=False)
    hp = {"grad_weight"} if recipe == "rowwise_with_gw_hp" else set()
    for k in ("output", "grad_input", "grad_weight"):
        if k not in hp:
            assert torch.equal(theirs[k], ours[k]), f"{recipe} {dtype} {k}: {_diff(theirs[k], ours[k])}"
            continue
        g2, x2 = g.double().reshape(-1, 64), x.double().reshape(-1, 128)
        m, ref, got = g2.abs().t() @ x2.abs(), ours[k].double(), theirs[k].double()
        bound = 2 * U_OUT[dtype] * ref.abs() + 2 * (x2.shape[0] + 1) * 2.0**-24 * m
        assert bool(((got - ref).abs() <= bound).all()), f"{recipe} {dtype} {k}: {_diff(theirs[k], ours[k])}"


@pytest.mark.parametrize("emulate", [True, False], ids=["emulate", "scaled_mm"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("recipe", AO_RECIPES)
def test_float8linear_with_bias_matches_within_output_rounding(recipe, dtype, emulate, skip_if_refused):
    """torchao adds the bias after rounding the GEMM to the output dtype (two roundings);
    fp8ref adds it in float32 and rounds once. With emulate=False torchao also runs
    torch._scaled_mm, which accumulates in its own order and, for rowwise float32 inputs,
    returns bfloat16 (torchao routes rowwise float32 through bfloat16).
    Per element, with u = half an ulp of the output (relative), m = the GEMM's magnitude sum
    sum|a||b| (hp operands x 1.1, covering the FP8 rounding of each operand):
    |torchao - fp8ref| <= 2u|y| + u m + 2 (K + 3) 2^-24 m."""
    if not emulate:
        skip_if_refused(
            probes.torchao_recipe_refusal(recipe), f"torchao's {recipe} Float8Linear through torch._scaled_mm on cpu"
        )
    theirs, ours, (lin, x, g) = _pair(recipe, emulate, dtype, bias=True)
    u = U_OUT[dtype] if (emulate or recipe == "tensorwise") else max(U_OUT[dtype], U_OUT[torch.bfloat16])
    x2, g2, w = x.double().reshape(-1, 128), g.double().reshape(-1, 64), lin.weight.double()
    mags = {
        "output": (x2.abs() @ w.abs().t() + lin.bias.double().abs()).reshape(ours["output"].shape),
        "grad_input": (g2.abs() @ w.abs()).reshape(ours["grad_input"].shape),
        "grad_weight": g2.abs().t() @ x2.abs(),
    }
    K = {"output": 128, "grad_input": 64, "grad_weight": x2.shape[0]}
    for k, mag in mags.items():
        ref, got, m = ours[k].double(), theirs[k].double(), 1.1 * mag
        bound = 2 * u * ref.abs() + u * m + 2 * (K[k] + 3) * 2.0**-24 * m
        assert bool(((got - ref).abs() <= bound).all()), f"{recipe} {dtype} {k}: {_diff(theirs[k], ours[k])}"
    # bias gradient: a sum of 64 token rows, accumulated in float32 by fp8ref and in the
    # parameter dtype by torchao: at most 64 roundings of the running sum
    gb_bound = 64 * U_OUT[dtype] * 2 * g2.abs().sum(0)
    assert bool(((theirs["grad_bias"].double() - ours["grad_bias"].double()).abs() <= gb_bound).all())


@pytest.mark.parametrize("recipe", AO_RECIPES)
def test_float8linear_sqnr_against_high_precision_meets_torchaos_thresholds(
    recipe, record_observation, skip_if_refused
):
    skip_if_refused(
        probes.torchao_recipe_refusal(recipe), f"torchao's {recipe} Float8Linear through torch._scaled_mm on cpu"
    )
    theirs, _, (lin, x, g) = _pair(recipe, False, torch.bfloat16, bias=True)
    hp = fwd_bwd(copy.deepcopy(lin), x, g)
    out_db, gw_db, gx_db = (sqnr(theirs[k], hp[k]) for k in ("output", "grad_weight", "grad_input"))
    record_observation(
        f"torchao {recipe} bf16 SQNR vs high precision (out / grad_in / grad_w)",
        f"{out_db:.1f} / {gx_db:.1f} / {gw_db:.1f} dB",
    )
    assert out_db >= 18 and gw_db >= 17 and gx_db >= 17


# --- torch.compile ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [torch.bfloat16, pytest.param(torch.float32, marks=pytest.mark.slow)],
    ids=str,
)
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_compiled_dynamic_cast_matches_eager_bitwise(recipe, source, fresh_dynamo):
    """Scale and codes of torchao's cast compiled whole, against eager and fp8ref, from bfloat16
    and from float32 sources (a float32 amax and its division take another compiled path), with
    an overflowing-after-scaling row and a row of zeros among ordinary ones."""
    g, pow2 = (tensorwise(), False) if recipe == "tensorwise" else (axiswise(-1), True)
    x = (torch.randn(64, 128, generator=torch.Generator().manual_seed(0)) * 7).to(source)
    x[3] = 0.0
    x[5, 7] = 3.0e4
    # torchao's cast alone, whole (fullgraph): fp8ref's wrapper around it would break the graph
    compiled = torch.compile(ao.dynamic_cast_fn(E4M3FN, g, pow2), fullgraph=True, dynamic=False)
    c_codes, c_scale = compiled(x)
    e_codes, e_scale = ao.dynamic_cast(x, E4M3FN, g, pow2)
    assert torch.equal(c_scale.view(torch.int32), e_scale.view(torch.int32)), "compiled scale differs from eager"
    assert torch.equal(c_codes, e_codes), f"{int((c_codes != e_codes).sum())} compiled codes differ from eager"
    q = quantize(x, E4M3FN, g, pow2=pow2)
    assert torch.equal(c_codes, q.codes) and torch.equal(c_scale, q.scale)


# --- the modded-nanogpt custom op -------------------------------------------------------------
X_S, W_S, GRAD_S = 2.0, 32.0, 2.0**29  # modded-nanogpt's static scales (its lm_head)


@torch.library.custom_op("fp8ref_test::mm_t", mutates_args=())
def _mm_t(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x_f8 = (x / X_S).to(torch.float8_e4m3fn)
    w_f8 = (w / W_S).to(torch.float8_e4m3fn)
    out = torch._scaled_mm(
        x_f8,
        w_f8.t(),
        out_dtype=torch.bfloat16,
        scale_a=x.new_tensor(X_S),
        scale_b=x.new_tensor(W_S),
        use_fast_accum=True,
    )
    return out, x_f8, w_f8


@_mm_t.register_fake
def _(x, w):
    return (x @ w.t()).to(torch.bfloat16), x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)


@torch.library.custom_op("fp8ref_test::mm_t_backward", mutates_args=())
def _mm_t_backward(g: torch.Tensor, x_f8: torch.Tensor, w_f8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    one = g.new_tensor(1.0, dtype=torch.float32)
    g_f8 = (g / GRAD_S).to(torch.float8_e5m2)
    grad_x = torch._scaled_mm(
        g_f8,
        w_f8.t().contiguous().t(),
        out_dtype=torch.bfloat16,
        scale_a=one * GRAD_S,
        scale_b=one * W_S,
        use_fast_accum=False,
    )
    grad_w = torch._scaled_mm(
        x_f8.t().contiguous(),
        g_f8.t().contiguous().t(),
        out_dtype=torch.float32,
        scale_a=one * X_S,
        scale_b=one * GRAD_S,
        use_fast_accum=False,
    )
    return grad_x, grad_w.t().contiguous()  # custom ops return fresh, contiguous tensors


@_mm_t_backward.register_fake
def _(g, x_f8, w_f8):
    return g.new_empty(g.shape[0], w_f8.shape[1], dtype=torch.bfloat16), g.new_empty(
        w_f8.shape[0], w_f8.shape[1], dtype=torch.float32
    )


def _mm_t_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1], output[2])


def _mm_t_grad(ctx, grad_out, *_):
    x_f8, w_f8 = ctx.saved_tensors
    return _mm_t_backward(grad_out, x_f8, w_f8)


_mm_t.register_autograd(_mm_t_grad, setup_context=_mm_t_setup)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_modded_nanogpt_static_custom_op_matches_the_static_recipe(compiled, fresh_dynamo):
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(32, 64, generator=gen) * 4).requires_grad_()
    w = (torch.randn(48, 64, generator=gen) * 20).requires_grad_()
    g = torch.randn(32, 48, generator=gen) * 2.0**20
    fn = (lambda a, b: _mm_t(a, b)[0]) if not compiled else torch.compile(lambda a, b: _mm_t(a, b)[0], dynamic=False)
    out = fn(x, w)
    out.float().backward(g.to(torch.bfloat16).float())
    r = RECIPES["static"]
    ref = emulated_gemm(x.detach(), w.detach(), r.output)
    gb = g.to(torch.bfloat16).float()
    ref_gx = emulated_gemm(gb, w.detach().t(), r.grad_input)
    ref_gw = emulated_gemm(gb.t(), x.detach().t(), r.grad_weight)
    # the op rounds output and grad_x to bf16 (half an ulp: 2^-8 relative) and grad_w to float32;
    # float32 accumulation in another order adds at most K * 2^-24 of the magnitude sum
    for name, got, want, u, K in (
        ("output", out, ref, 2.0**-8, 64),
        ("grad_x", x.grad, ref_gx, 2.0**-8, 48),
        ("grad_w", w.grad, ref_gw, 2.0**-24, 32),
    ):
        tol = u * want.abs() + K * 2.0**-22 * want.abs().max()
        assert bool(((got.float() - want).abs() <= tol).all()), f"{name}: {_diff(got, want)}"


# --- a small model, trained -------------------------------------------------------------------
class _TinyLM(torch.nn.Module):
    def __init__(self, vocab=64, d=64, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)
            )
            for _ in range(layers)
        )
        self.lm_head = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.emb(ids)
        for blk in self.blocks:
            h = h + blk(h)
        return self.lm_head(h)


def _train_tiny(convert_fn, steps=20):
    torch.manual_seed(0)
    model = convert_fn(_TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    data = torch.randint(0, 64, (steps, 8, 33), generator=gen)
    data[:, :, 1::2] = (data[:, :, 0::2][:, :, :16] * 7 + 3) % 64  # a learnable rule
    losses = []
    for ids in data:
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@functools.cache
def _tiny_losses_without_fp8() -> tuple[float, ...]:
    """The same training in float32, for the observation: once a run, not once a recipe."""
    return tuple(_train_tiny(lambda m: m))


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_tiny_model_trains_the_same_under_torchao_and_fp8ref(recipe, record_observation):
    """20 AdamW steps of a 2-block MLP language model converted by torchao (emulate=True, the
    same arithmetic) and by fp8ref. The first steps must agree to float32 noise; later steps
    may drift as tiny differences compound through AdamW, so the bound is 1% of the loss."""
    import torchao.float8 as torchao_float8

    cfg = dataclasses.replace(torchao_float8.Float8LinearConfig.from_recipe_name(recipe), emulate=True)

    def ao(m):
        return torchao_float8.convert_to_float8_training(
            m, config=cfg, module_filter_fn=lambda mod, fqn: not fqn.endswith("lm_head")
        )

    theirs = _train_tiny(ao)
    ours = _train_tiny(lambda m: convert(m, recipe))
    hp = _tiny_losses_without_fp8()
    record_observation(
        f"tiny LM 20 steps ({recipe}): loss first/last torchao, fp8ref, fp32 without FP8",
        f"{theirs[0]:.4f}/{theirs[-1]:.4f}, {ours[0]:.4f}/{ours[-1]:.4f}, {hp[0]:.4f}/{hp[-1]:.4f}",
    )
    assert theirs[-1] < theirs[0] and ours[-1] < ours[0]
    assert abs(theirs[0] - ours[0]) <= 1e-5 * ours[0]
    assert all(abs(a - b) <= 0.01 * b for a, b in zip(theirs, ours)), list(zip(theirs, ours))


GEMMS = ["output", "grad_input", "grad_weight"]


@pytest.mark.parametrize("gemm", GEMMS)
@pytest.mark.parametrize("recipe", AO_RECIPES)
def test_each_gemm_casts_its_operands_as_the_recipe_says(recipe, gemm):
    """Float8Linear's three GEMMs one by one: each operand torchao hands its float8 GEMM (forward
    and both backward GEMMs) is, bitwise, the recipe's cast of the contraction-last operand
    (format, granularity along the contraction dim, pow2), so a change at one call site fails
    alone. A GEMM the recipe keeps in high precision must not run in float8."""
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(32, 64, generator=gen) * 3).to(torch.bfloat16)
    w = (torch.randn(48, 64, generator=gen) / 4).to(torch.bfloat16)
    grad = (torch.randn(32, 48, generator=gen) * 1e-3).to(torch.bfloat16)
    with ao.float8_gemm_operands() as seen:
        probes.run_torchao_linear(recipe, x, w, grad, emulate=True)
    bad = [line for line in gemm_operand_mismatches(RECIPES[recipe], seen, x, w, grad) if line.startswith(gemm)]
    assert not bad, f"{recipe}: " + "; ".join(bad)


@ON_DEVICES
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_compiled_float8linear_forward_and_backward_match_eager(recipe, device, skip_if_refused, fresh_dynamo):
    skip_if_refused(probes.torchao_recipe_refusal(recipe, device), f"torchao's {recipe} Float8Linear on {device}")
    problem = f8l.check_compiled_matches_eager(recipe, device)
    assert problem is None, problem


@ON_DEVICES
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_weight_cast_follows_the_weight_after_optimizer_steps(recipe, device, skip_if_refused, full_float32):
    skip_if_refused(probes.torchao_float8_refusal(), "torchao.float8")
    problem = f8l.check_weight_cast_follows_the_weight(recipe, device)
    assert problem is None, problem


# --- Float8LinearConfig's options -----------------------------------------------------------------
@pytest.mark.parametrize("recipe", AO_RECIPES)
def test_pad_inner_dim_pads_k_with_zeros(recipe, skip_if_refused):
    """pad_inner_dim=True: every GEMM's ragged contraction dim (K = 200, 72, 40) reaches
    torch._scaled_mm padded to a multiple of 16 with the zero code, and the layer trains as the
    reference does (fp8ref/harness/ao/float8_linear.py says the bound)."""
    skip_if_refused(
        probes.torchao_recipe_refusal(recipe), f"torchao's {recipe} Float8Linear through torch._scaled_mm on cpu"
    )
    problem = f8l.check_pad_inner_dim(recipe, "cpu")
    assert problem is None, problem


@pytest.mark.parametrize("recipe", AO_RECIPES)
def test_force_recompute_fp8_weight_in_bwd_leaves_training_bitwise_unchanged(recipe):
    problem = f8l.check_force_recompute_is_inert(recipe, "cpu")
    assert problem is None, problem
