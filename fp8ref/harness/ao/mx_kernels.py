"""torchao's MX and NVFP4 choices that pick a layout or a kernel, held to the reference on any
device: each dim1 cast kernel (``MXFP8Dim1CastKernelChoice``), each GEMM kernel preference of an
MX linear (``KernelPreference``), NVFP4's scale layouts and Triton quantize kernel, NVFP4's
dynamic per-tensor scale. Each check returns ``(refusal, problem)``: ``refusal`` is the install
refusing the path (the test skips, naming it), ``problem`` a line saying what differs, both None
when the path runs and conforms. Shared by tests/cpu/install/test_mx_linear.py,
tests/gpu/test_mx_linear.py and tests/gpu/test_mx_kernels.py.

The refusal comes from the smallest call that asks (``*_refusal``: the same library call on inputs
of ones, the same shapes, asked once per process); the check then runs unguarded, so an error in
its own code or a library's failure on the check's inputs fails the test instead of reading as the
install's refusal.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

from ...reference import nvfp4
from ...reference.emulate import cast_operand
from ...reference.formats import E4M3FN, FloatFormat
from ...reference.quantize import quantize
from ...reference.recipes import OperandCast
from ...reference.scaling import mx
from ..gemm.documented_accumulator import gemm_accumulation
from ..stack.checked import Checked
from ..stack.refusals import attempt

TORCH_ELEM = {"e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1fn": "float4_e2m1fn_x2"}


def _ones_like(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Known-good inputs of the check's own shapes, dtypes and device, for the question it asks first."""
    return tuple(torch.ones_like(t) for t in tensors)


def _refusal(call: Any, device: str) -> str | None:
    ok, result = attempt(call, device)
    return None if ok else str(result)


def _bounded(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, device: str, what: str) -> str | None:
    """``got`` against the exact product of the dequantized operands a (M, K) and b (N, K): within
    one bfloat16 rounding of the output and the accumulation bound of this device's GEMM
    (float32's, (K + 1) 2^-24, on the CPU; on a GPU at least the bound of the least documented FP8
    accumulator, ``documented_accumulator.gemm_accumulation``): |got - ref| <= 2^-8 |ref| + b m, with m = sum |a||b|."""
    a, b, got = a.double().cpu(), b.double().cpu(), got.double().cpu()
    ref, mag = a @ b.t(), a.abs() @ b.abs().t()
    excess = (got - ref).abs() - (2.0**-8 * ref.abs() + gemm_accumulation(a.shape[1], device) * mag)
    if bool((excess > 0).any()):
        return f"{what}: {int((excess > 0).sum())} outputs outside the bound, max excess {excess.max().item():.3e}"
    return None


def linear_inputs(seed: int = 0, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """x (24, 128) and w (64, 128) in bfloat16, w's blocks of 32 spread over 2^-4 ... 2^4."""
    gen = torch.Generator().manual_seed(seed)
    blocks = torch.exp2(torch.randint(-4, 5, (64, 4), generator=gen).float()).repeat_interleave(32, dim=1)
    x = torch.randn(24, 128, generator=gen).to(torch.bfloat16)
    w = (torch.randn(64, 128, generator=gen) * blocks).to(torch.bfloat16)
    return x.to(device), w.to(device)


def _mx_linear(x: torch.Tensor, w: torch.Tensor, w_fmt: str, a_fmt: str, mode: str, preference: str) -> torch.Tensor:
    """torchao's ``F.linear(x, MXTensor(w))``, the activation quantized on the fly, the GEMM picked by
    ``KernelPreference[preference]``."""
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    scaling, pref = ScaleCalculationMode(mode), KernelPreference[preference]
    act = QuantizeTensorToMXKwargs(
        elem_dtype=getattr(torch, TORCH_ELEM[a_fmt]), scaling_mode=scaling, kernel_preference=pref
    )
    elem = getattr(torch, TORCH_ELEM[w_fmt])
    wm = MXTensor.to_mx(w, elem, 32, scaling_mode=scaling, act_quant_kwargs=act, kernel_preference=pref)
    return F.linear(x, wm)


@functools.cache
def mx_linear_refusal(device: str, w_fmt: str, a_fmt: str, mode: str, preference: str) -> str | None:
    """Does torchao's MX linear run with this element pair, scale mode and kernel preference on
    ``device``? Asked with ones of ``linear_inputs``' shapes: None, or the install's refusal."""
    x, w = _ones_like(*linear_inputs(device=device))
    return _refusal(lambda: _mx_linear(x, w, w_fmt, a_fmt, mode, preference), device)


def check_mx_linear(device: str, w_fmt: FloatFormat, a_fmt: FloatFormat, mode: str, preference: str) -> Checked:
    """``F.linear(x, MXTensor(w))`` with the activation quantized on the fly, its GEMM picked by
    ``KernelPreference[preference]`` (EMULATED: dequantize and matmul; AUTO: the device's MX GEMM
    through torch._scaled_mm): the product of fp8ref's MX casts of x and w (blocks of 32 along K),
    within ``_bounded``'s bound."""
    refused = mx_linear_refusal(device, w_fmt.name, a_fmt.name, mode, preference)
    if refused is not None:
        return Checked.refused(refused)
    x, w = linear_inputs(device=device)
    got = _mx_linear(x, w, w_fmt.name, a_fmt.name, mode, preference)
    a = cast_operand(x.cpu(), OperandCast(a_fmt, mx(32, mode)))
    b = cast_operand(w.cpu(), OperandCast(w_fmt, mx(32, mode)))
    return Checked.compared(
        _bounded(got, a, b, device, f"MX linear w {w_fmt.name}, a {a_fmt.name}, {mode}, {preference}")
    )


# NVFP4Tensor.to_nvfp4's keyword arguments per layout or kernel
NVFP4_LAYOUTS: dict[str, dict[str, bool]] = {
    "row-major": {},
    "swizzled": {"is_swizzled_scales": True},
    "triton": {"is_swizzled_scales": True, "use_triton_kernel": True},
}


def _nvfp4_dequantized(w: torch.Tensor, scale: torch.Tensor | None, layout: str) -> torch.Tensor:
    """torchao's ``NVFP4Tensor.to_nvfp4`` of ``w`` in ``layout``, dequantized to float32."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    return NVFP4Tensor.to_nvfp4(w, per_tensor_scale=scale, **NVFP4_LAYOUTS[layout]).dequantize(torch.float32)


def _nvfp4_layout_inputs(two_level: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(11)
    w = torch.randn(128, 64, generator=gen) * 3
    return w, nvfp4.per_tensor_scale(w.float().abs().amax()) if two_level else None


@functools.cache
def nvfp4_layout_refusal(device: str, layout: str, two_level: bool) -> str | None:
    """Does torchao quantize to NVFP4 in ``layout`` (one level or two) on ``device``? Asked with
    ones of the check's shape: None, or the install's refusal."""
    w = torch.ones(_nvfp4_layout_inputs(False)[0].shape, device=device)
    scale = nvfp4.per_tensor_scale(torch.tensor(1.0)).to(device) if two_level else None
    return _refusal(lambda: _nvfp4_dequantized(w, scale, layout), device)


def check_nvfp4_layout(device: str, layout: str, two_level: bool) -> Checked:
    """``NVFP4Tensor.to_nvfp4`` with the layout's keywords (scales row-major or swizzled; torchao's
    Triton quantize kernel), one level or two (the reference's per-tensor scale): its dequantized
    values bitwise the reference's (one level: under either element division torchao has used,
    fp8ref.reference.nvfp4.Division; which one is pinned in the profile). A float32 input: torchao
    0.17's float32 dequantization of a bfloat16 tensor's NVFP4 differs from 0.18's and the
    reference's while its codes and block scales do not (the layouts are what this checks)."""
    refused = nvfp4_layout_refusal(device, layout, two_level)
    if refused is not None:
        return Checked.refused(refused)
    w, scale = _nvfp4_layout_inputs(two_level)
    got = _nvfp4_dequantized(w.to(device), None if scale is None else scale.to(device), layout)
    if two_level:
        refs = {"two-level": nvfp4.quantize(w, scale).dequantize(torch.float32)}
    else:
        refs = {
            d.value: nvfp4.quantize_current(w, "single", division=d).dequantize(torch.float32) for d in nvfp4.Division
        }
    if any(torch.equal(got.cpu(), ref) for ref in refs.values()):
        return Checked.compared(None)
    counts = {name: int((got.cpu() != ref).sum()) for name, ref in refs.items()}
    return Checked.compared(
        f"NVFP4 {layout}, {'two' if two_level else 'one'} level: elements differ from the reference {counts}"
    )


def _nvfp4_linear(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, dynamic_scale: bool) -> torch.Tensor:
    """torchao's ``F.linear(x, NVFP4Tensor(w))``, the activation quantized to NVFP4 on the fly."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, QuantizeTensorToNVFP4Kwargs

    act = QuantizeTensorToNVFP4Kwargs(use_dynamic_per_tensor_scale=dynamic_scale)
    return F.linear(x, NVFP4Tensor.to_nvfp4(w, per_tensor_scale=w_scale, act_quant_kwargs=act))


@functools.cache
def nvfp4_linear_refusal(device: str, dynamic_scale: bool) -> str | None:
    """Does torchao's NVFP4 linear with activation quantization run on ``device``? Asked with ones
    of ``linear_inputs``' shapes: None, or the install's refusal."""
    x, w = _ones_like(*linear_inputs(4, device))
    scale = nvfp4.per_tensor_scale(torch.tensor(1.0)).to(device)
    return _refusal(lambda: _nvfp4_linear(x, w, scale, dynamic_scale), device)


def check_nvfp4_linear(device: str, dynamic_scale: bool) -> Checked:
    """``F.linear(x, NVFP4Tensor(w))`` with the activation quantized to NVFP4 on the fly, its
    per-tensor scale from the activation's amax (``use_dynamic_per_tensor_scale``) or none: the
    product of fp8ref's NVFP4 casts of x and w, within ``_bounded``'s bound."""
    refused = nvfp4_linear_refusal(device, dynamic_scale)
    if refused is not None:
        return Checked.refused(refused)
    x, w = linear_inputs(4, device)
    w_scale = nvfp4.per_tensor_scale(w.float().abs().amax())
    got = _nvfp4_linear(x, w, w_scale, dynamic_scale)
    x_scale = nvfp4.per_tensor_scale(x.float().abs().amax()) if dynamic_scale else None
    a = nvfp4.quantize(x.cpu(), None if x_scale is None else x_scale.cpu()).dequantize(torch.float32)
    b = nvfp4.quantize(w.cpu(), w_scale.cpu()).dequantize(torch.float32)
    return Checked.compared(_bounded(got, a, b, device, f"NVFP4 linear, dynamic per-tensor scale {dynamic_scale}"))


def _dim1_cast(a: torch.Tensor, choice: str, mode: str) -> torch.Tensor:
    """torchao's dim1 MXFP8 cast of ``a`` by ``MXFP8Dim1CastKernelChoice[choice]``, dequantized."""
    from torchao.prototype.mx_formats.config import MXFP8Dim1CastKernelChoice, ScaleCalculationMode
    from torchao.prototype.mx_formats.utils import _to_mxfp8_dim1_kernel_wrapper
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    kernel = MXFP8Dim1CastKernelChoice[choice]
    pref = KernelPreference.EMULATED if kernel is MXFP8Dim1CastKernelChoice.TORCH else KernelPreference.AUTO
    t = _to_mxfp8_dim1_kernel_wrapper(
        a, 32, torch.float8_e4m3fn, torch.bfloat16, pref, kernel, ScaleCalculationMode(mode)
    )
    return t.dequantize(torch.float32)


def _dim1_input() -> torch.Tensor:
    gen = torch.Generator().manual_seed(5)
    # (rows and columns multiples of 128, as torchao's dim1 kernels take them; blocks of 32 down a
    # column spread over 2^-20 ... 2^20)
    blocks = torch.exp2(torch.randint(-20, 20, (8, 128), generator=gen).float()).repeat_interleave(32, dim=0)
    return (torch.randn(256, 128, generator=gen) * blocks).to(torch.bfloat16)


@functools.cache
def dim1_cast_kernel_refusal(choice: str, device: str, mode: str) -> str | None:
    """Does ``MXFP8Dim1CastKernelChoice[choice]`` cast on ``device`` in ``mode``? Asked with ones of
    the check's shape: None, or the install's refusal."""
    a = torch.ones(_dim1_input().shape, dtype=torch.bfloat16, device=device)
    return _refusal(lambda: _dim1_cast(a, choice, mode), device)


def check_dim1_cast_kernel(choice: str, device: str, mode: str) -> Checked:
    """torchao's dim1 (column-wise) MXFP8 cast by ``MXFP8Dim1CastKernelChoice[choice]`` (what its
    MX training casts a GEMM's transposed operand with): the MXTensor it builds dequantizes
    bitwise to fp8ref's MX cast of the transposed input (E4M3, blocks of 32, ``mode``). TORCH is
    the eager cast (``to_mx`` on the transposed input), the others torchao's kernels."""
    refused = dim1_cast_kernel_refusal(choice, device, mode)
    if refused is not None:
        return Checked.refused(refused)
    a = _dim1_input()
    got = _dim1_cast(a.to(device), choice, mode).cpu()
    # dim1: blocks of 32 down each column of a; the MXTensor holds a^T, blocked along its rows
    want = quantize(a.t().float().contiguous(), E4M3FN, mx(32, mode)).dequantize(torch.float32)
    if got.shape != want.shape:
        return Checked.compared(f"dim1 cast {choice} {mode}: shape {tuple(got.shape)}, a^T's {tuple(want.shape)}")
    if torch.equal(got, want):
        return Checked.compared(None)
    return Checked.compared(f"dim1 cast {choice} {mode}: {int((got != want).sum())} of {want.numel()} values differ")


def mx_grad_input_problem(grad: torch.Tensor, w: torch.Tensor) -> str | None:
    """The input gradient of ``F.linear(x, MXTensor(w)).sum()``: ones @ W for W fp8ref's MX E4M3
    cast of w, in blocks of 32 along K (the forward's cast) or along N (the backward GEMM's
    contraction), within one bfloat16 rounding and float32 accumulation (``_bounded``)."""
    ones = torch.ones(grad.shape[0], w.shape[0])
    casts = {
        "along K": quantize(w, E4M3FN, mx(32)).dequantize(torch.float32),
        "along N": quantize(w.t().contiguous(), E4M3FN, mx(32)).dequantize(torch.float32).t(),
    }
    problems = [_bounded(grad, ones, wq.t(), "cpu", f"MX grad_input, w cast {how}") for how, wq in casts.items()]
    return None if None in problems else "; ".join(p for p in problems if p)


def cast_kernel_problem(kernel: str, mode: str, x: torch.Tensor, data: torch.Tensor, scale: torch.Tensor) -> str | None:
    """An MX E4M3 cast kernel's output for ``x`` (``data`` and ``scale``, blocks of 32; a ``*dim0``
    kernel scales along rows, a dim1 one along columns and returns them column-major) against
    torchao's ``to_mx`` in ``mode``, bitwise, and ``to_mx``'s scales against fp8ref's: None when
    all agree, else which differ."""
    from .torchao_compat import to_mx

    ref_x = x if kernel.endswith("dim0") else x.t().contiguous()
    want_scale, want_data = to_mx(ref_x, E4M3FN, 32, mode)
    q = quantize(ref_x.float(), E4M3FN, mx(32, mode))
    got_data = data.view(torch.uint8).cpu()
    got_data = got_data if kernel.endswith("dim0") else got_data.t()
    got_scale = scale.view(torch.uint8).cpu().reshape(want_scale.shape)
    if not torch.equal(got_scale, want_scale):
        return f"{kernel} {mode} {tuple(x.shape)}: scales differ from to_mx"
    if not torch.equal(got_data.reshape(want_data.shape), want_data):
        return f"{kernel} {mode} {tuple(x.shape)}: elements differ from to_mx"
    if not torch.equal(want_scale, q.scale_e8m0):
        return f"to_mx {mode}: scales differ from fp8ref"
    return None
