"""Linear layers: one Float8Linear GEMM whose operand cast changed, a misplaced MX swizzle tile, an
MX amax taken through bfloat16, a pad_inner_dim that pads with another code or not enough.

Deliberately broken stand-ins run through the same checks the suite holds torch and torchao to;
each must be reported (a fault that passes means a check went blind). ``test_catch_rate.py`` runs
every family again for the catch rate printed at the end of the run."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fp8ref.harness.ao.float8_linear import gemm_operand_mismatches
from fp8ref.reference.formats import E4M3FN, E5M2
from fp8ref.reference.recipes import RECIPES


# --- Float8Linear's GEMMs one by one, through fp8ref/harness/ao/float8_linear.gemm_operand_mismatches ------
@pytest.mark.needs("torchao")
@pytest.mark.parametrize("gemm", ["output", "grad_input", "grad_weight"])
def test_a_gemm_whose_operand_cast_changed_is_caught_alone(gemm):
    """torchao's real operands held to a recipe whose one GEMM's A operand changed format (what a
    changed call site in torchao would look like from the other side): that GEMM alone fails."""
    from fp8ref.harness.ao import torchao_compat as ao
    from fp8ref.harness.stack import probes

    gen = torch.Generator().manual_seed(3)
    x, w = (torch.randn(32, 64, generator=gen) * 3).bfloat16(), (torch.randn(48, 64, generator=gen) / 4).bfloat16()
    grad = (torch.randn(32, 48, generator=gen) * 1e-3).bfloat16()
    with ao.float8_gemm_operands() as seen:
        probes.run_torchao_linear("tensorwise", x, w, grad, emulate=True)
    recipe = RECIPES["tensorwise"]
    assert not gemm_operand_mismatches(recipe, seen, x, w, grad)
    old = getattr(recipe, gemm)
    flipped = dataclasses.replace(old.a, fmt=E5M2 if old.a.fmt == E4M3FN else E4M3FN)
    broken = dataclasses.replace(recipe, **{gemm: dataclasses.replace(old, a=flipped)})
    bad = gemm_operand_mismatches(broken, seen, x, w, grad)
    assert bad and all(line.startswith(gemm) for line in bad), bad


# --- MX layouts and scales as linear layers use them ----------------------------------------------
def _misplaced_tile_layout(scales: torch.Tensor) -> torch.Tensor:
    """cuBLAS's block-scale layout with the two in-tile row indices swapped (r // 32 and r % 32)."""
    rows, cols = scales.shape
    pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
    padded = torch.zeros(pr, pc, dtype=scales.dtype)
    padded[:rows, :cols] = scales
    r, c = torch.arange(pr).view(-1, 1), torch.arange(pc).view(1, -1)
    tile = (r // 128) * (pc // 4) + c // 4
    inner = (r % 128 // 32) * 128 + (r % 32) * 4 + c % 4
    out = torch.empty(pr * pc, dtype=scales.dtype)
    out[(tile * 512 + inner).reshape(-1)] = padded.reshape(-1)
    return out


@pytest.mark.needs("torchao")
def test_a_misplaced_swizzle_tile_is_caught():
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    from fp8ref.harness.gemm import fp4_gemm
    from fp8ref.reference.quantize import quantize
    from fp8ref.reference.scaling import mx

    x = (torch.randn(256, 512, generator=torch.Generator().manual_seed(0)) * 3).bfloat16()
    plain = quantize(x, E4M3FN, mx(32)).scale_e8m0.reshape(256, 16)
    theirs = MXTensor.to_mx(x, torch.float8_e4m3fn, 32, is_swizzled_scales=True).scale.view(torch.uint8).reshape(-1)
    assert torch.equal(theirs, fp4_gemm.to_blocked(plain))
    assert not torch.equal(theirs, _misplaced_tile_layout(plain))


@pytest.mark.needs("torchao")
def test_an_mx_amax_taken_through_bfloat16_is_caught():
    """The boundary blocks tell a float32 amax from one rounded through bfloat16 first."""
    from fp8ref.harness.ao import torchao_compat as ao
    from fp8ref.reference.quantize import quantize
    from fp8ref.reference.scaling import mx

    edges = torch.nextafter(torch.exp2(torch.arange(-8.0, 9.0)), torch.zeros(17))  # just below 2^k
    x = torch.full((17, 32), 0.25) * edges[:, None]
    x[:, 3] = edges
    right = ao.to_mx(x, E4M3FN, 32, "floor")[0].reshape(-1)
    assert torch.equal(right, quantize(x, E4M3FN, mx(32)).scale_e8m0.reshape(-1))
    through_bf16 = quantize(x.bfloat16(), E4M3FN, mx(32)).scale_e8m0.reshape(-1)
    assert not torch.equal(right, through_bf16)


# --- pad_inner_dim, through fp8ref/harness/ao/float8_linear.check_pad_inner_dim -------------------
def _pad_with_ones(tensor: torch.Tensor, dims: int | tuple[int, ...]) -> torch.Tensor:
    from torchao.float8.float8_utils import pad_tensor_for_matmul

    out = pad_tensor_for_matmul(tensor, dims)
    codes = out.view(torch.uint8).clone()
    k_dim = dims if isinstance(dims, int) else dims[0]
    codes.narrow(k_dim, tensor.shape[k_dim], out.shape[k_dim] - tensor.shape[k_dim]).fill_(0x38)  # 1.0
    return codes.view(out.dtype)


def _pad_to_eight(tensor: torch.Tensor, dims: int | tuple[int, ...]) -> torch.Tensor:
    k_dim = dims if isinstance(dims, int) else dims[0]
    extra = -tensor.shape[k_dim] % 8
    pad = [0, 0, 0, 0]
    pad[1 if k_dim == 1 else 3] = extra
    codes = torch.nn.functional.pad(tensor.view(torch.uint8), pad)
    return codes.view(tensor.dtype)


PAD_FAULTS = {"pads K with the code of 1.0": _pad_with_ones, "pads K to a multiple of 8": _pad_to_eight}


def pad_fault_caught(fault: str) -> bool:
    from fp8ref.harness.ao.float8_linear import check_pad_inner_dim

    return check_pad_inner_dim("tensorwise", "cpu", pad=PAD_FAULTS[fault]) is not None


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("fault", list(PAD_FAULTS))
def test_a_pad_inner_dim_fault_is_caught(fault, skip_if_refused):
    from fp8ref.harness.stack import probes

    skip_if_refused(probes.torchao_recipe_refusal("tensorwise"), "torchao's tensorwise Float8Linear through _scaled_mm")
    assert pad_fault_caught(fault), f"{fault}: not caught"
