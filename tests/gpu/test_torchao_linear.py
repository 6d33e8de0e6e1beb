"""torchao's Float8Linear on the GPU against fp8ref's emulation (same recipe), its compiled casts
against eager, and pad_inner_dim and force_recompute_fp8_weight_in_bwd on the device
(fp8ref/harness/ao/float8_linear.py). Compiled forward+backward against eager and the weight cast
after optimizer steps run on CUDA from tests/cpu/install/test_torchao_linear.py, one test per
subject parametrized by device.
On the GPU torchao runs _scaled_mm, so outputs are compared by SQNR: the two differ only by
bfloat16 output rounding and accumulation order (~50 dB on CPU; >= 35 dB required). Casts and
scales are elementwise and compared bitwise."""

import copy

import pytest
import torch

from fp8ref.harness.ao import float8_linear as f8l
from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.harness.ao.float8_linear import fwd_bwd, torchao_convert
from fp8ref.harness.stack import probes
from fp8ref.reference.emulate import Fp8Linear
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.metrics import sqnr
from fp8ref.reference.quantize import quantize
from fp8ref.reference.recipes import TORCHAO_RECIPES
from fp8ref.reference.scaling import axiswise, tensorwise

pytestmark = [pytest.mark.sm(89, "FP8 tensor cores"), pytest.mark.needs("torchao")]


@pytest.mark.parametrize(
    "recipe",
    [
        "tensorwise",
        pytest.param("rowwise", marks=pytest.mark.sm(90, "rowwise")),
        pytest.param("rowwise_with_gw_hp", marks=pytest.mark.sm(90, "rowwise")),
    ],
)
def test_float8linear_on_device_matches_fp8ref(recipe, gpu_device, dry_run, skip_if_refused):
    skip_if_refused(
        probes.torchao_recipe_refusal(recipe, gpu_device), f"torchao's {recipe} Float8Linear on {gpu_device}"
    )
    d_in, d_out, tokens = (128, 64, 64) if dry_run else (2048, 4096, 4096)
    torch.manual_seed(0)
    lin = torch.nn.Linear(d_in, d_out, bias=False).to(torch.bfloat16).to(gpu_device)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(tokens, d_in, generator=gen).to(torch.bfloat16).to(gpu_device)
    g = torch.randn(tokens, d_out, generator=gen).to(torch.bfloat16).to(gpu_device)
    theirs = fwd_bwd(torchao_convert(lin, recipe), x, g)
    ours = fwd_bwd(Fp8Linear.from_linear(copy.deepcopy(lin), recipe), x, g)
    for name in ("output", "grad_input", "grad_weight"):
        a, b = theirs[name], ours[name]
        assert sqnr(a, b) >= 35, f"{recipe} {name} on {gpu_device}: SQNR {sqnr(a, b):.1f} dB"


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_compiled_casts_on_device_match_eager_and_fp8ref(recipe, gpu_device, fresh_dynamo):
    g, pow2 = (tensorwise(), False) if recipe == "tensorwise" else (axiswise(-1), True)
    x = (torch.randn(256, 512, generator=torch.Generator().manual_seed(0)) * 5).to(torch.bfloat16)
    xd = x.to(gpu_device)
    # torchao's cast alone, whole (fullgraph): fp8ref's wrapper around it would break the graph
    c_codes, c_scale = torch.compile(ao.dynamic_cast_fn(E4M3FN, g, pow2), fullgraph=True, dynamic=False)(xd)
    e_codes, e_scale = ao.dynamic_cast(xd, E4M3FN, g, pow2)
    q = quantize(x, E4M3FN, g, pow2=pow2)
    assert torch.equal(c_scale.cpu(), e_scale.cpu()) and torch.equal(e_scale.cpu(), q.scale)
    assert torch.equal(c_codes.cpu(), e_codes.cpu()) and torch.equal(e_codes.cpu(), q.codes)


@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_pad_inner_dim_pads_k_with_zeros(recipe, gpu_device, skip_if_refused):
    """K = 200, 72 and 40 are what torch._scaled_mm refuses on CUDA unpadded: pad_inner_dim=True must
    hand the kernel zero-padded operands and train as the reference (fp8ref.harness.ao.float8_linear)."""
    skip_if_refused(
        probes.torchao_recipe_refusal(recipe, gpu_device), f"torchao's {recipe} Float8Linear on {gpu_device}"
    )
    problem = f8l.check_pad_inner_dim(recipe, gpu_device)
    assert problem is None, problem


@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_force_recompute_fp8_weight_in_bwd_leaves_training_bitwise_unchanged(
    recipe, gpu_device, skip_if_refused, full_float32
):
    skip_if_refused(probes.torchao_float8_refusal(), "torchao.float8")
    problem = f8l.check_force_recompute_is_inert(recipe, gpu_device)
    assert problem is None, problem
