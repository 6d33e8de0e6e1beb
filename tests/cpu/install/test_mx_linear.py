"""MX and NVFP4 tensors as linear layers use them: torchao's MXTensor and NVFP4Tensor inside
``F.linear`` (the weight transposed inside the op), swizzled scale layouts, and the MX scale at
the amax boundaries where the amax's own precision decides the E8M0 exponent.

Guards the regressions that shipped there: transposed MX scales read along the wrong axis, a
swizzled scale tile misplaced, a block amax taken through bfloat16 (fp32 -> bf16 -> e8m0) that
moves the exponent, mixed element formats dequantized with the other operand's format."""

import pytest
import torch
import torch.nn.functional as F

from fp8ref.harness.gemm import fp4_gemm
from fp8ref.harness.stack.refusals import attempt
from fp8ref.reference import nvfp4
from fp8ref.reference.formats import E2M1FN, E4M3FN, E5M2
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import mx
from tests.common import mx_kernel_checks as mkc

pytestmark = pytest.mark.needs("torchao")

# (weight, activation) element formats: one format throughout, and FP4 weights with FP8 activations
PAIRS = [(E4M3FN, E4M3FN), (E5M2, E5M2), (E2M1FN, E2M1FN), (E2M1FN, E4M3FN)]


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("w_fmt,a_fmt", PAIRS, ids=[f"w{w.name}-a{a.name}" for w, a in PAIRS])
def test_mx_weight_in_f_linear_matches_the_reference_gemm(w_fmt, a_fmt, mode):
    """``F.linear(x, MXTensor(w))`` with the activation quantized on the fly (torchao's dynamic
    MX quantization, emulated on the CPU: KernelPreference.EMULATED): the product of fp8ref's MX
    casts of x and w (blocks of 32 along K for both, w transposed by the op), within one bfloat16
    rounding of the output and float32 accumulation: |torchao - ref| <= u|y| + (K + 1) 2^-24 sum|a||b|
    (tests/common/mx_kernel_checks.py)."""
    refused, problem = mkc.check_mx_linear("cpu", w_fmt, a_fmt, mode, "EMULATED")
    assert refused is None and problem is None, refused or problem


@pytest.mark.parametrize("two_level", [False, True], ids=["one-level", "two-level"])
@pytest.mark.parametrize("layout", list(mkc.NVFP4_LAYOUTS))
def test_nvfp4_quantizes_alike_in_every_scale_layout(layout, two_level, skip_unless):
    """NVFP4Tensor with row-major or swizzled block scales, and through torchao's Triton quantize
    kernel where this install has it: the same values as the reference's NVFP4 quantization."""
    refused, problem = mkc.check_nvfp4_layout("cpu", layout, two_level)
    skip_unless(refused, f"torchao's NVFP4 {layout} quantization on cpu")
    assert problem is None, problem


def test_mx_linear_backward_is_recorded(record_observation):
    """Backward through an MXTensor weight in F.linear: implementation-defined (torchao 0.18's MX
    inference tensors refuse it on the CPU); recorded, and where it runs the input gradient is
    the transposed product of the same casts."""
    from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs

    x, w = mkc.linear_inputs(1)
    xr = x.clone().requires_grad_()
    wm = MXTensor.to_mx(w, torch.float8_e4m3fn, 32, act_quant_kwargs=QuantizeTensorToMXKwargs())
    ok, result = attempt(lambda: F.linear(xr, wm).float().sum().backward())
    record_observation("torchao MXTensor F.linear backward on cpu", "runs" if ok else result)
    if ok:
        assert xr.grad is not None and bool(torch.isfinite(xr.grad.float()).all())


def test_nvfp4_weight_in_f_linear_dequantizes_like_the_reference(record_observation):
    """Weight-only NVFP4 in F.linear (single level: no per-tensor scale) dequantizes the weight
    bitwise as fp8ref does and then runs the same linear; the dynamic (activation-quantized) form
    goes through a block-scaled FP4 GEMM, which this install may refuse (recorded)."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, QuantizeTensorToNVFP4Kwargs

    x, w = mkc.linear_inputs(2)
    wn = NVFP4Tensor.to_nvfp4(w)
    theirs = wn.dequantize(torch.float32)
    # the element division's arithmetic differs between torchao releases (fp8ref.reference.nvfp4):
    # either is accepted here, and which one this install uses is pinned (torchao.nvfp4.single.division)
    refs = {d.value: nvfp4.quantize_current(w, "single", division=d).dequantize(torch.float32) for d in nvfp4.Division}
    same = [name for name, ours in refs.items() if torch.equal(theirs, ours)]
    assert same, {name: int((theirs != ours).sum()) for name, ours in refs.items()}
    record_observation("torchao NVFP4Tensor single-level division", same[0])
    assert torch.equal(F.linear(x, wn), F.linear(x, refs[same[0]].to(torch.bfloat16)))
    dyn = NVFP4Tensor.to_nvfp4(w, act_quant_kwargs=QuantizeTensorToNVFP4Kwargs())
    ok, result = attempt(lambda: F.linear(x, dyn))
    record_observation("torchao NVFP4Tensor F.linear with activation quantization on cpu", "runs" if ok else result)


@pytest.mark.parametrize("fmt", [E4M3FN, E2M1FN], ids=lambda f: f.name)
@pytest.mark.parametrize("shape", [(256, 512), (300, 640), (128, 128)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_swizzled_mx_scales_are_the_reference_layout_both_ways(shape, fmt):
    """torchao's swizzled (blocked) MX scales, several 128x4 tiles and a ragged edge: the same
    bytes as fp8ref's cuBLAS layout of fp8ref's own scales (``fp4_gemm.to_blocked``); torchao's
    ``from_blocked`` takes fp8ref's layout back to the plain scales; and the swizzled tensor
    dequantizes like fp8ref."""
    from torchao.prototype.mx_formats.mx_tensor import MXTensor
    from torchao.prototype.mx_formats.utils import from_blocked

    rows, cols = shape
    x = (torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows + cols)) * 3).to(torch.bfloat16)
    q = quantize(x, fmt, mx(32))
    plain = q.scale_e8m0.reshape(rows, cols // 32)
    t = MXTensor.to_mx(x, getattr(torch, mkc.TORCH_ELEM[fmt.name]), 32, is_swizzled_scales=True)
    assert torch.equal(t.scale.view(torch.uint8).reshape(-1), fp4_gemm.to_blocked(plain))
    back = from_blocked(fp4_gemm.to_blocked(plain).view(torch.float8_e8m0fnu), rows, cols // 32)
    assert torch.equal(back.view(torch.uint8), plain)
    assert torch.equal(t.dequantize(torch.float32), q.dequantize(torch.float32))


def _below(x: torch.Tensor) -> torch.Tensor:
    """The next representable value below each (positive) element, in its own dtype."""
    return torch.nextafter(x, torch.zeros_like(x))


_RCEIL_LOG2 = pytest.mark.xfail(
    reason="known torchao 0.18 discrepancy: RCEIL's eager fallback takes ceil(log2(amax / max)) in "
    "float32, whose log2 rounds k + 2^-23-ish to k for |k| >= 1, so an amax one float32 ulp above "
    "max * 2^k gets 2^k instead of 2^(k+1) (seen with torch 2.13.0; bfloat16 blocks are not affected)",
)


@pytest.mark.parametrize(
    "dtype,mode",
    [
        (torch.float32, "floor"),
        pytest.param(torch.float32, "rceil", marks=_RCEIL_LOG2),
        (torch.bfloat16, "floor"),
        (torch.bfloat16, "rceil"),
    ],
    ids=["float32-floor", "float32-rceil", "bfloat16-floor", "bfloat16-rceil"],
)
def test_mx_scale_at_the_amax_boundaries(dtype, mode):
    """Blocks whose amax is a power of two, or one ulp of the block's own dtype below or above
    one (for RCEIL, times the element max): where a float32 amax taken through bfloat16 rounds to
    the power of two and moves the E8M0 exponent. torchao's to_mx and fp8ref agree bitwise."""
    from fp8ref.harness.ao import torchao_compat as ao

    k = torch.arange(-20, 21, dtype=torch.float32)
    base = torch.exp2(k) * (1.0 if mode == "floor" else E4M3FN.max)
    edges = torch.cat(
        [base, _below(base.to(dtype)).float(), torch.nextafter(base.to(dtype), base.to(dtype) * 2).float()]
    )
    x = torch.full((edges.numel(), 32), 0.5, dtype=torch.float32) * edges[:, None].abs() / 4
    x[:, 7] = edges
    x = x.to(dtype)
    assert torch.equal(x[:, 7].float(), edges)  # each edge exact in the block's dtype
    theirs, _ = ao.to_mx(x, E4M3FN, 32, mode)
    ours = quantize(x, E4M3FN, mx(32, mode)).scale_e8m0.reshape(theirs.shape)
    bad = (theirs != ours).nonzero().flatten().tolist()
    assert not bad, [(edges[i].item(), int(theirs.reshape(-1)[i]), int(ours.reshape(-1)[i])) for i in bad[:6]]
