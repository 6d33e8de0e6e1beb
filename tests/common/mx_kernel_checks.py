"""torchao's MX and NVFP4 choices that pick a layout or a kernel, held to the reference on any
device: each dim1 cast kernel (``MXFP8Dim1CastKernelChoice``), each GEMM kernel preference of an
MX linear (``KernelPreference``), NVFP4's scale layouts and Triton quantize kernel, NVFP4's
dynamic per-tensor scale. Each check returns ``(refusal, problem)``: ``refusal`` is the install
refusing the path (the test skips, naming it), ``problem`` a line saying what differs, both None
when the path runs and conforms. Shared by tests/cpu/install/test_mx_linear.py,
tests/gpu/test_mx_linear.py and tests/gpu/test_mx_kernels.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from fp8ref.harness.stack.refusals import attempt
from fp8ref.reference import nvfp4
from fp8ref.reference.emulate import cast_operand
from fp8ref.reference.formats import E4M3FN, FloatFormat
from fp8ref.reference.quantize import quantize
from fp8ref.reference.recipes import OperandCast
from fp8ref.reference.scaling import mx
from tests.common.float8linear_checks import gemm_accumulation

Result = tuple[str | None, str | None]
TORCH_ELEM = {"e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1fn": "float4_e2m1fn_x2"}


def _run(fn: Callable[[], Any], device: str) -> tuple[Any, str | None]:
    ok, result = attempt(fn, device)
    return (result, None) if ok else (None, str(result))


def _bounded(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, device: str, what: str) -> str | None:
    """``got`` against the exact product of the dequantized operands a (M, K) and b (N, K): within
    one bfloat16 rounding of the output and the accumulation bound of this device's GEMM
    (float32's, (K + 1) 2^-24, on the CPU; on a GPU at least the bound of the narrowest width its
    FP8 _scaled_mm shows within a K block): |got - ref| <= 2^-8 |ref| + b m, with m = sum |a||b|."""
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


def check_mx_linear(device: str, w_fmt: FloatFormat, a_fmt: FloatFormat, mode: str, preference: str) -> Result:
    """``F.linear(x, MXTensor(w))`` with the activation quantized on the fly, its GEMM picked by
    ``KernelPreference[preference]`` (EMULATED: dequantize and matmul; AUTO: the device's MX GEMM
    through torch._scaled_mm): the product of fp8ref's MX casts of x and w (blocks of 32 along K),
    within ``_bounded``'s bound."""
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    x, w = linear_inputs(device=device)
    scaling, pref = ScaleCalculationMode(mode), KernelPreference[preference]

    def linear() -> torch.Tensor:
        act = QuantizeTensorToMXKwargs(
            elem_dtype=getattr(torch, TORCH_ELEM[a_fmt.name]), scaling_mode=scaling, kernel_preference=pref
        )
        elem = getattr(torch, TORCH_ELEM[w_fmt.name])
        wm = MXTensor.to_mx(w, elem, 32, scaling_mode=scaling, act_quant_kwargs=act, kernel_preference=pref)
        return F.linear(x, wm)

    got, refused = _run(linear, device)
    if refused is not None:
        return refused, None
    a = cast_operand(x.cpu(), OperandCast(a_fmt, mx(32, mode)))
    b = cast_operand(w.cpu(), OperandCast(w_fmt, mx(32, mode)))
    return None, _bounded(got, a, b, device, f"MX linear w {w_fmt.name}, a {a_fmt.name}, {mode}, {preference}")


# NVFP4Tensor.to_nvfp4's keyword arguments per layout or kernel
NVFP4_LAYOUTS: dict[str, dict[str, bool]] = {
    "row-major": {},
    "swizzled": {"is_swizzled_scales": True},
    "triton": {"is_swizzled_scales": True, "use_triton_kernel": True},
}


def check_nvfp4_layout(device: str, layout: str, two_level: bool) -> Result:
    """``NVFP4Tensor.to_nvfp4`` with the layout's keywords (scales row-major or swizzled; torchao's
    Triton quantize kernel), one level or two (the reference's per-tensor scale): its dequantized
    values bitwise the reference's (one level: under either element division torchao has used,
    fp8ref.reference.nvfp4.Division; which one is pinned in the profile). A float32 input: torchao
    0.17's float32 dequantization of a bfloat16 tensor's NVFP4 differs from 0.18's and the
    reference's while its codes and block scales do not (the layouts are what this checks)."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    gen = torch.Generator().manual_seed(11)
    w = torch.randn(128, 64, generator=gen) * 3
    scale = nvfp4.per_tensor_scale(w.float().abs().amax()) if two_level else None
    got, refused = _run(
        lambda: NVFP4Tensor.to_nvfp4(
            w.to(device), per_tensor_scale=None if scale is None else scale.to(device), **NVFP4_LAYOUTS[layout]
        ).dequantize(torch.float32),
        device,
    )
    if refused is not None:
        return refused, None
    if two_level:
        refs = {"two-level": nvfp4.quantize(w, scale).dequantize(torch.float32)}
    else:
        refs = {
            d.value: nvfp4.quantize_current(w, "single", division=d).dequantize(torch.float32) for d in nvfp4.Division
        }
    if any(torch.equal(got.cpu(), ref) for ref in refs.values()):
        return None, None
    counts = {name: int((got.cpu() != ref).sum()) for name, ref in refs.items()}
    return None, f"NVFP4 {layout}, {'two' if two_level else 'one'} level: elements differ from the reference {counts}"


def check_nvfp4_linear(device: str, dynamic_scale: bool) -> Result:
    """``F.linear(x, NVFP4Tensor(w))`` with the activation quantized to NVFP4 on the fly, its
    per-tensor scale from the activation's amax (``use_dynamic_per_tensor_scale``) or none: the
    product of fp8ref's NVFP4 casts of x and w, within ``_bounded``'s bound."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, QuantizeTensorToNVFP4Kwargs

    x, w = linear_inputs(4, device)
    w_scale = nvfp4.per_tensor_scale(w.float().abs().amax())
    act = QuantizeTensorToNVFP4Kwargs(use_dynamic_per_tensor_scale=dynamic_scale)
    got, refused = _run(
        lambda: F.linear(x, NVFP4Tensor.to_nvfp4(w, per_tensor_scale=w_scale, act_quant_kwargs=act)), device
    )
    if refused is not None:
        return refused, None
    x_scale = nvfp4.per_tensor_scale(x.float().abs().amax()) if dynamic_scale else None
    a = nvfp4.quantize(x.cpu(), None if x_scale is None else x_scale.cpu()).dequantize(torch.float32)
    b = nvfp4.quantize(w.cpu(), w_scale.cpu()).dequantize(torch.float32)
    return None, _bounded(got, a, b, device, f"NVFP4 linear, dynamic per-tensor scale {dynamic_scale}")


def check_dim1_cast_kernel(choice: str, device: str, mode: str) -> Result:
    """torchao's dim1 (column-wise) MXFP8 cast by ``MXFP8Dim1CastKernelChoice[choice]`` (what its
    MX training casts a GEMM's transposed operand with): the MXTensor it builds dequantizes
    bitwise to fp8ref's MX cast of the transposed input (E4M3, blocks of 32, ``mode``). TORCH is
    the eager cast (``to_mx`` on the transposed input), the others torchao's kernels."""
    from torchao.prototype.mx_formats.config import MXFP8Dim1CastKernelChoice, ScaleCalculationMode
    from torchao.prototype.mx_formats.utils import _to_mxfp8_dim1_kernel_wrapper
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    gen = torch.Generator().manual_seed(5)
    # (rows and columns multiples of 128, as torchao's dim1 kernels take them; blocks of 32 down a
    # column spread over 2^-20 ... 2^20)
    blocks = torch.exp2(torch.randint(-20, 20, (8, 128), generator=gen).float()).repeat_interleave(32, dim=0)
    a = (torch.randn(256, 128, generator=gen) * blocks).to(torch.bfloat16)
    kernel = MXFP8Dim1CastKernelChoice[choice]
    pref = KernelPreference.EMULATED if kernel is MXFP8Dim1CastKernelChoice.TORCH else KernelPreference.AUTO

    def cast() -> torch.Tensor:
        t = _to_mxfp8_dim1_kernel_wrapper(
            a.to(device), 32, torch.float8_e4m3fn, torch.bfloat16, pref, kernel, ScaleCalculationMode(mode)
        )
        return t.dequantize(torch.float32)

    got, refused = _run(cast, device)
    if refused is not None:
        return refused, None
    # dim1: blocks of 32 down each column of a; the MXTensor holds a^T, blocked along its rows
    want = quantize(a.t().float().contiguous(), E4M3FN, mx(32, mode)).dequantize(torch.float32)
    got = got.cpu()
    if got.shape != want.shape:
        return None, f"dim1 cast {choice} {mode}: shape {tuple(got.shape)}, a^T's {tuple(want.shape)}"
    if torch.equal(got, want):
        return None, None
    return None, f"dim1 cast {choice} {mode}: {int((got != want).sum())} of {want.numel()} values differ"
