"""MX and NVFP4 tensors as linear layers use them: torchao's MXTensor and NVFP4Tensor inside
``F.linear`` (the weight transposed inside the op), swizzled scale layouts, and the MX scale at
the amax boundaries where the amax's own precision decides the E8M0 exponent.

Guards the regressions that shipped there: transposed MX scales read along the wrong axis, a
swizzled scale tile misplaced, a block amax taken through bfloat16 (fp32 -> bf16 -> e8m0) that
moves the exponent, mixed element formats dequantized with the other operand's format."""

import functools

import pytest
import torch
import torch.nn.functional as F

from fp8ref.harness.ao import mx_kernels as mkc
from fp8ref.harness.ao import scale_edges as sec
from fp8ref.harness.gemm import fp4_gemm
from fp8ref.harness.stack.refusals import attempt
from fp8ref.reference import nvfp4
from fp8ref.reference.formats import E2M1FN, E4M3FN, E5M2
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import mx
from tests.common.params import on_devices

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
    (fp8ref/harness/ao/mx_kernels.py)."""
    refused, problem = mkc.check_mx_linear("cpu", w_fmt, a_fmt, mode, "EMULATED")
    assert refused is None and problem is None, refused or problem


@on_devices()
@pytest.mark.parametrize("two_level", [False, True], ids=["one-level", "two-level"])
@pytest.mark.parametrize("layout", list(mkc.NVFP4_LAYOUTS))
def test_nvfp4_quantizes_alike_in_every_scale_layout(layout, two_level, device, skip_if_refused):
    """NVFP4Tensor with row-major or swizzled block scales, and through torchao's Triton quantize
    kernel where this install has it: the same values as the reference's NVFP4 quantization."""
    refused, problem = mkc.check_nvfp4_layout(device, layout, two_level)
    skip_if_refused(refused, f"torchao's NVFP4 {layout} quantization on {device}")
    assert problem is None, problem


@functools.cache
def mx_linear_backward_refusal() -> str | None:
    """Does backward run through an MXTensor weight (E4M3, blocks of 32, the activation quantized
    on the fly) in F.linear on the CPU? Asked with one token and a 32 x 32 weight of ones: None,
    or the install's refusal."""
    from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs

    def backward() -> None:
        x = torch.ones(1, 32, dtype=torch.bfloat16, requires_grad=True)
        w = torch.ones(32, 32, dtype=torch.bfloat16)
        wm = MXTensor.to_mx(w, torch.float8_e4m3fn, 32, act_quant_kwargs=QuantizeTensorToMXKwargs())
        F.linear(x, wm).float().sum().backward()

    ok, result = attempt(backward)
    return None if ok else str(result)


def test_mx_linear_backward_is_the_product_of_the_casts(skip_if_refused, record_observation):
    """Backward through an MXTensor weight in F.linear: whether it runs is implementation-defined
    (torchao 0.18's MX inference tensors refuse it on the CPU) and recorded; where it runs, the
    input gradient is the gradient times fp8ref's cast of the weight (``mkc.mx_grad_input_problem``)."""
    from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs

    refused = mx_linear_backward_refusal()
    record_observation("torchao MXTensor F.linear backward on cpu", refused or "runs")
    skip_if_refused(refused, "backward through an MXTensor weight in F.linear on cpu")
    x, w = mkc.linear_inputs(1)
    xr = x.clone().requires_grad_()
    wm = MXTensor.to_mx(w, torch.float8_e4m3fn, 32, act_quant_kwargs=QuantizeTensorToMXKwargs())
    F.linear(xr, wm).float().sum().backward()
    assert xr.grad is not None, "backward ran and left no input gradient"
    problem = mkc.mx_grad_input_problem(xr.grad, w)
    assert problem is None, problem


def test_nvfp4_weight_in_f_linear_dequantizes_like_the_reference(record_observation):
    """Weight-only NVFP4 in F.linear (single level: no per-tensor scale) dequantizes the weight
    bitwise as fp8ref does and then runs the same linear."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

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


@functools.cache
def nvfp4_activation_linear_refusal() -> str | None:
    """Does F.linear run an NVFP4 weight (two-level) whose activation is quantized to NVFP4 on the
    fly (a block-scaled FP4 GEMM) on the CPU? Asked with ones of ``mkc.linear_inputs``' shapes,
    the shapes the check uses: None, or the install's refusal."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, QuantizeTensorToNVFP4Kwargs

    def linear() -> None:
        x, w = (torch.ones(t.shape, dtype=torch.bfloat16) for t in mkc.linear_inputs())
        scale = nvfp4.per_tensor_scale(w.float().abs().amax())
        F.linear(x, NVFP4Tensor.to_nvfp4(w, per_tensor_scale=scale, act_quant_kwargs=QuantizeTensorToNVFP4Kwargs()))

    ok, result = attempt(linear)
    return None if ok else str(result)


def test_nvfp4_weight_with_activation_quantization_in_f_linear(skip_if_refused, record_observation):
    """The dynamic (activation-quantized) NVFP4 linear goes through a block-scaled FP4 GEMM, which
    this install may refuse (recorded); where it runs, the product of fp8ref's NVFP4 casts of x
    and w within one bfloat16 rounding and float32 accumulation (``mkc.check_nvfp4_linear``, as
    the CUDA twin tests/gpu/test_mx_linear.py checks it)."""
    refused = nvfp4_activation_linear_refusal()
    record_observation("torchao NVFP4Tensor F.linear with activation quantization on cpu", refused or "runs")
    skip_if_refused(refused, "torchao's NVFP4 linear with activation quantization on cpu")
    refused, problem = mkc.check_nvfp4_linear("cpu", dynamic_scale=False)
    assert refused is None and problem is None, refused or problem


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


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_mx_scale_at_the_amax_boundaries(dtype, mode, record_observation, record_defect):
    """Blocks whose amax is a power of two, or one ulp of the block's own dtype below or above
    one (for RCEIL, times the element max): where a float32 amax taken through bfloat16 rounds to
    the power of two and moves the E8M0 exponent. torchao's to_mx and fp8ref agree bitwise, but
    for the named deviation ``rceil_f32_log2`` (fp8ref/harness/casts/deviations.py: RCEIL's eager
    fallback takes a float32 log2, so a float32 amax one ulp above 448 x 2^k gets 2^k), excused for
    exactly its answer and recorded; any other scale fails (fp8ref/harness/ao/scale_edges.py)."""
    from fp8ref.harness.ao import torchao_compat as ao

    problem, known_deviations = sec.check_mx_boundary_scales(ao.to_mx, dtype, mode)
    record_observation(
        f"torchao mx {mode} scales at the amax boundaries ({dtype})",
        sec.known_deviation_words(known_deviations, sec.mx_boundary_blocks(dtype, mode).shape[0]),
    )
    for key, n in known_deviations.items():
        record_defect(key, f"torchao to_mx {mode} ({dtype})", n)
    assert problem is None, f"torchao {problem}"
