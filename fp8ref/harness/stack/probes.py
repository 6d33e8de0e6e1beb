"""What the install under test can do, each asked with the smallest call that exercises one
capability (a dtype, a ``_scaled_mm`` scaling on a device, torchao's float8 training with one
recipe).

Each probe returns ``None`` when the call runs, or the install's answer as text: ``'missing: ...'``
when a package or dtype is absent, ``'refused: Type: message'`` when the install raises
(``fp8ref.harness.stack.refusals`` says what counts). An error that is not a refusal (a bug) propagates.

The behaviour profile records these answers, and the tests use the same answers to skip a test
whose subject the install refuses. So a test skips only when the *minimal* call is refused, never
because its own larger call failed: that is a failure. Answers are cached per process.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util

import torch

from ...reference.formats import FloatFormat, get_format, select
from ...reference.recipes import TORCHAO_RECIPES
from ...reference.validate import instance, one_of
from ..gemm.gemm_probes import operand_dtypes
from . import refusals
from .install import device_kind
from .refusals import attempt, import_refusal

__all__ = [
    "SCALED_MM_SCALINGS",
    "torch_dtype_refusal",
    "float8_formats",
    "scaled_mm_refusal",
    "fp4_scaled_mm_refusal",
    "fp4_gemm_api",
    "fp4_gemm_refusal",
    "torchao_float8_refusal",
    "torchao_recipe_refusal",
    "run_torchao_linear",
]

# The scalings of torch._scaled_mm: per tensor, per row/column, DeepSeek-V3's 1x128 x 128x128
# blocks (cuBLAS: sm90 only), MX 1x32 with E8M0 scales (sm100); and with FP4 operands, MXFP4
# (1x32, E8M0) and NVFP4 (1x16, E4M3) (sm100).
SCALED_MM_SCALINGS = ("tensorwise", "rowwise", "blockwise", "mx", "mxfp4", "nvfp4")


@functools.cache
def torch_dtype_refusal(fmt: str | FloatFormat) -> str | None:
    """None when this torch has the format's dtype, else ``'missing: torch X has no float8_...'``."""
    fmt = get_format(fmt)
    if fmt.torch_dtype() is None:
        return f"missing: torch {torch.__version__} has no {fmt.torch_name}"
    return None


def float8_formats() -> list[FloatFormat]:
    """The float8 formats (those with a torch dtype) whose dtype this torch has."""
    return [f for f in select(has_torch_dtype=True) if torch_dtype_refusal(f) is None]


@functools.cache
def scaled_mm_refusal(scaling: str, out_dtype: torch.dtype = torch.bfloat16, device: str = "cpu") -> str | None:
    """Does ``torch._scaled_mm`` take E4M3 operands with ``scaling`` scales on ``device``?

    The call is the layout the backends document: A (M, K) row-major, B (K, N) column-major (E4M3,
    or E4M3 x E5M2 for an E5M2 output, the pair cuBLAS has a kernel for), dims
    multiples of 16, scales of ones: float32 () (tensorwise); (M, 1) and (1, N) (rowwise);
    (M, K/128) with strides (1, M) and (K/128, N/128) with strides (1, K/128) (blockwise: 1x128
    for A, 128x128 for B, as torch's ScaledBlas.cpp checks them); E8M0 in cuBLAS's swizzled
    layout, round_up(M, 128) x round_up(K/32, 4) (mx; all ones, so the swizzle does not matter);
    mxfp4/nvfp4: FP4 operands and block scales as ``fp4_gemm.scaled_mm`` lays them out."""
    one_of(scaling, SCALED_MM_SCALINGS, "scaling")
    instance(out_dtype, torch.dtype, "out_dtype", "a torch.dtype")
    device_kind(device)  # validates
    if not hasattr(torch, "_scaled_mm"):
        return f"missing: torch {torch.__version__} has no torch._scaled_mm"
    if scaling in ("mxfp4", "nvfp4"):
        return fp4_scaled_mm_refusal(scaling, "torch._scaled_mm", out_dtype, device)
    M, K, N = (32, 64, 48) if scaling in ("tensorwise", "rowwise") else (128, 256, 128)

    def call():
        gen = torch.Generator().manual_seed(0)
        a_dtype, b_dtype = operand_dtypes(out_dtype)  # E4M3 x E5M2 for an E5M2 output
        a = torch.randn(M, K, generator=gen).to(a_dtype).to(device)
        b = torch.randn(N, K, generator=gen).to(b_dtype).to(device).t()
        if scaling == "tensorwise":
            sa, sb = torch.tensor(1.0, device=device), torch.tensor(1.0, device=device)
        elif scaling == "rowwise":
            sa, sb = torch.ones(M, 1, device=device), torch.ones(1, N, device=device)
        elif scaling == "blockwise":
            sa = torch.ones(K // 128, M, device=device).t()
            sb = torch.ones(N // 128, K // 128, device=device).t()
        else:
            e8m0 = torch.float8_e8m0fnu
            sa = torch.ones(M * K // 32, device=device).to(e8m0)
            sb = torch.ones(N * K // 32, device=device).to(e8m0)
        # (through refusals.call: its documented limit counts for this call only, and only as the
        # meta registration takes it)
        return refusals.call("torch._scaled_mm", a, b, scale_a=sa, scale_b=sb, out_dtype=out_dtype)

    ok, result = attempt(call, device)
    return None if ok else str(result)


@functools.cache
def fp4_scaled_mm_refusal(
    kind: str, api: str, out_dtype: torch.dtype = torch.bfloat16, device: str = "cpu"
) -> str | None:
    """Does ``api`` (one of ``fp4_gemm.APIS``) run a ``kind`` (mxfp4, nvfp4) FP4 GEMM on ``device``?
    Asked with 128 x 256 x 128 ones and unit block scales in cuBLAS's layout."""
    from ..gemm import fp4_gemm

    one_of(kind, fp4_gemm.FP4_KINDS, "kind")
    one_of(api, fp4_gemm.APIS, "api")
    instance(out_dtype, torch.dtype, "out_dtype", "a torch.dtype")
    device_kind(device)  # validates
    if not hasattr(torch, "float4_e2m1fn_x2"):
        return f"missing: torch {torch.__version__} has no float4_e2m1fn_x2"
    m, k = 128, 256
    codes = torch.full((m, k), 2, dtype=torch.uint8)  # E2M1 1.0
    one = fp4_gemm.unit_scales(kind, m, k)
    ok, result = attempt(lambda: fp4_gemm.scaled_mm(kind, codes, one, codes, one, out_dtype, device, api=api), device)
    return None if ok else str(result)


def fp4_gemm_api(kind: str, out_dtype: torch.dtype = torch.bfloat16, device: str = "cpu") -> str | None:
    """The API (of ``fp4_gemm.APIS``, in that order) through which this install runs a ``kind``
    FP4 GEMM on ``device``, or None when every one refuses."""
    from ..gemm import fp4_gemm

    return next((api for api in fp4_gemm.APIS if fp4_scaled_mm_refusal(kind, api, out_dtype, device) is None), None)


def fp4_gemm_refusal(kind: str, out_dtype: torch.dtype = torch.bfloat16, device: str = "cpu") -> str | None:
    """None when some API runs a ``kind`` FP4 GEMM on ``device``; else each API's answer, joined
    (what a test skips with)."""
    from ..gemm import fp4_gemm

    if fp4_gemm_api(kind, out_dtype, device) is not None:
        return None
    return "; ".join(f"{api}: {fp4_scaled_mm_refusal(kind, api, out_dtype, device)}" for api in fp4_gemm.APIS)


@functools.cache
def torchao_float8_refusal() -> str | None:
    """None when ``torchao.float8`` imports, ``'missing: ...'`` when torchao is not installed,
    ``'refused: ImportError: ...'`` when it is installed but does not import with this torch."""
    if importlib.util.find_spec("torchao") is None:
        return "missing: torchao is not installed"
    return import_refusal("torchao.float8", ("Float8LinearConfig", "convert_to_float8_training"))


def run_torchao_linear(
    recipe: str, x: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, emulate: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """torchao's Float8Linear for ``recipe`` with ``weight`` (no bias), ``emulate=False`` running
    ``torch._scaled_mm``: forward of ``x``, backward of ``grad``; (output, grad_input, grad_weight)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    one_of(recipe, TORCHAO_RECIPES, "recipe")
    lin = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=weight.dtype, device=weight.device)
    with torch.no_grad():
        lin.weight.copy_(weight)
    cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)
    m = convert_to_float8_training(torch.nn.Sequential(lin), config=cfg)
    xi = x.detach().clone().requires_grad_()
    y = m(xi)
    y.backward(grad)
    gx, gw = xi.grad, m[0].weight.grad
    assert isinstance(gx, torch.Tensor) and isinstance(gw, torch.Tensor)  # backward always gives both
    return y.detach(), gx, gw


@functools.cache
def torchao_recipe_refusal(recipe: str, device: str = "cpu") -> str | None:
    """Does torchao's float8 training run ``recipe`` forward and backward through
    ``torch._scaled_mm`` on ``device``? Asked with a bfloat16 Linear(64, 32) and 32 tokens."""
    one_of(recipe, TORCHAO_RECIPES, "recipe")
    missing = torchao_float8_refusal()
    if missing is not None:
        return missing
    gen = torch.Generator().manual_seed(0)
    x, w, g = (torch.randn(*s, generator=gen).to(torch.bfloat16).to(device) for s in ((32, 64), (32, 64), (32, 32)))
    ok, result = attempt(lambda: run_torchao_linear(recipe, x, w, g), device)
    return None if ok else str(result)
