"""Read torchao's float8 training choices and outputs in fp8ref's terms (harness, not reference).

torchao is imported lazily; everything here raises ImportError with the package's name when it
is missing. Written against torchao 0.17-0.18 (``torchao.float8``, ``prototype.mx_formats``).

torchao names axiswise scaling by the dim of the operand *as it enters torch.mm*; fp8ref lays
every GEMM operand out contraction-last (``fp8ref.reference.recipes``), where the same scaling is always
``axiswise(-1)``. ``recipe_table`` translates.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...reference.formats import FloatFormat, as_format
from ...reference.scaling import Granularity
from ..casts.implementations import Implementation
from ..stack.install import require

__all__ = [
    "require_torchao",
    "recipe_table",
    "tensor_to_scale",
    "dynamic_cast",
    "to_mx",
    "mx_dequantize",
    "mx_default_modes",
    "mx_tensor_dequantize",
    "narrow_cast",
    "narrow_decode",
    "pack_uint4",
    "nvfp4_quantize",
    "nvfp4_dequantize",
    "nvfp4_per_tensor_scale",
    "float8_gemm_operands",
    "float8_kernel_operands",
    "torchao_float8_linear",
]

# torchao's f32 <-> unpacked FP4/FP6 helpers (``prototype.mx_formats.kernels``) by format name
_NARROW_HELPERS = {
    "e2m1fn": ("f32_to_f4_unpacked", "f4_unpacked_to_f32"),
    "e2m3fn": ("f32_to_f6_e2m3_unpacked", "f6_e2m3_unpacked_to_f32"),
    "e3m2fn": ("f32_to_f6_e3m2_unpacked", "f6_e3m2_unpacked_to_f32"),
}


def require_torchao(what: str = "this") -> Any:
    """torchao, with ``torchao.float8`` imported; ``MissingPackage`` when torchao is not installed
    (an ImportError from ``torchao.float8`` itself is this torch refusing torchao, and propagates)."""
    require("torchao", what)
    import torchao.float8

    return torchao


def torchao_float8_linear(recipe: str, emulate: bool = True) -> Callable[[torch.nn.Linear], torch.nn.Module]:
    """torchao's conversion of a copy of a Linear, in a Sequential, for ``recipe``; by default with
    ``emulate=True`` (FP8 GEMMs as float32 matmuls of the dequantized operands: bitwise comparable
    with the reference), else through ``torch._scaled_mm``."""

    def make(lin: torch.nn.Linear) -> torch.nn.Module:
        require_torchao()
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)
        return convert_to_float8_training(torch.nn.Sequential(copy.deepcopy(lin)), config=cfg)

    return make


def _fmt_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.float8_")


def recipe_table(recipe_name: str) -> dict:
    """``Float8LinearConfig.from_recipe_name(name)`` flattened like ``LinearRecipe.describe()``."""
    require_torchao()
    from torchao.float8.config import Float8LinearConfig, ScalingGranularity, ScalingType

    c = Float8LinearConfig.from_recipe_name(recipe_name)
    pow2 = " pow2" if c.round_scales_to_power_of_2 else ""

    def describe(cc: Any) -> str:
        if cc.scaling_type is ScalingType.DISABLED:
            return "high-precision"
        g = "tensorwise" if cc.scaling_granularity is ScalingGranularity.TENSORWISE else "axiswise(dim=-1)"
        return f"{_fmt_name(cc.target_dtype)} {g}{pow2}"

    return {
        "output.a": describe(c.cast_config_input),
        "output.b": describe(c.cast_config_weight),
        "output.fast_accum": c.gemm_config_output.use_fast_accum,
        "grad_input.a": describe(c.cast_config_grad_output),
        "grad_input.b": describe(c.cast_config_weight_for_grad_input),
        "grad_input.fast_accum": c.gemm_config_grad_input.use_fast_accum,
        "grad_weight.a": describe(c.cast_config_grad_output_for_grad_weight),
        "grad_weight.b": describe(c.cast_config_input_for_grad_weight),
        "grad_weight.fast_accum": c.gemm_config_grad_weight.use_fast_accum,
    }


def _granularity_args(granularity: Granularity) -> tuple[Any, int | None]:
    from torchao.float8.config import ScalingGranularity

    if granularity.kind == "tensorwise":
        return ScalingGranularity.TENSORWISE, None
    if granularity.kind == "axiswise":
        return ScalingGranularity.AXISWISE, granularity.dim
    raise ValueError(f"granularity: torchao.float8 scales tensorwise or axiswise, got {granularity}")


def tensor_to_scale(x: torch.Tensor, fmt: FloatFormat, granularity: Granularity, pow2: bool) -> torch.Tensor:
    """torchao's ``float8_utils.tensor_to_scale``."""
    require_torchao()
    from torchao.float8.float8_utils import tensor_to_scale as ao_tensor_to_scale

    g, dim = _granularity_args(granularity)
    return ao_tensor_to_scale(
        x, as_format(fmt).torch_dtype(), scaling_granularity=g, axiswise_dim=dim, round_scales_to_power_of_2=pow2
    )


def dynamic_cast(
    x: torch.Tensor, fmt: FloatFormat, granularity: Granularity, pow2: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """torchao's ``hp_tensor_to_float8_dynamic``: (uint8 codes, scale)."""
    return dynamic_cast_fn(fmt, granularity, pow2)(x)


def dynamic_cast_fn(
    fmt: FloatFormat, granularity: Granularity, pow2: bool
) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``dynamic_cast`` with its checks and imports done: a function of ``x`` holding nothing but
    torchao's cast, what a test compiles (fp8ref's own checks would break the graph)."""
    require_torchao()
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    from torchao.float8.float8_training_tensor import LinearMMConfig

    dtype = as_format(fmt).torch_dtype()
    g, dim = _granularity_args(granularity)
    config = LinearMMConfig()

    def cast(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = hp_tensor_to_float8_dynamic(
            x, dtype, config, scaling_granularity=g, axiswise_dim=dim, round_scales_to_power_of_2=pow2
        )
        return t._data.view(torch.uint8), t._scale

    return cast


def to_mx(
    x: torch.Tensor, fmt: FloatFormat, block_size: int = 32, mode: str = "floor"
) -> tuple[torch.Tensor, torch.Tensor]:
    """torchao's ``prototype.mx_formats.mx_tensor.to_mx``: (E8M0 scale codes, element codes;
    FP4 elements come packed two per byte, FP6 one per byte)."""
    require_torchao()
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx as ao_to_mx

    scale, data = ao_to_mx(x, _mx_elem_dtype(as_format(fmt)), block_size, scaling_mode=ScaleCalculationMode(mode))
    return scale.view(torch.uint8), data.view(torch.uint8)


def _mx_elem_dtype(fmt: FloatFormat) -> Any:
    """What torchao's MX code calls an element format: a dtype, or a string for FP6."""
    if fmt.name == "e2m1fn":
        return torch.float4_e2m1fn_x2
    if fmt.name in ("e2m3fn", "e3m2fn"):
        return f"fp6_{fmt.name.removesuffix('fn')}"
    return fmt.torch_dtype()


def mx_dequantize(
    codes: torch.Tensor,
    scale_codes: torch.Tensor,
    fmt: FloatFormat,
    block_size: int = 32,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """torchao's MX dequantization (``mx_tensor.to_dtype``) of element codes (..., K; FP4 packed,
    (..., K / 2)) with E8M0 scale codes (..., K / block_size)."""
    require_torchao()
    from torchao.prototype.mx_formats.mx_tensor import to_dtype

    fmt = as_format(fmt)
    elem = _mx_elem_dtype(fmt)
    data = codes.view(elem) if fmt.bits == 8 else codes  # FP4/FP6 stay uint8 (as MXTensor holds them)
    return to_dtype(data, scale_codes.view(torch.float8_e8m0fnu), elem, block_size, dtype)


def mx_tensor_dequantize(
    x: torch.Tensor,
    fmt: FloatFormat,
    block_size: int = 32,
    mode: str = "floor",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``MXTensor.to_mx(x, elem, block_size, mode).dequantize(dtype)``."""
    require_torchao()
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    t = MXTensor.to_mx(x, _mx_elem_dtype(as_format(fmt)), block_size, ScaleCalculationMode(mode))
    return t.dequantize(dtype)


def mx_default_modes() -> dict[str, str]:
    """The scaling mode each of torchao's MX casts uses when none is passed (a default that flips
    changes numerics while every explicit-mode test still passes): ``to_mx`` and, where this
    torchao defines them, its Triton/CUDA cast kernels."""
    import inspect

    require_torchao()
    from torchao.prototype.mx_formats import kernels
    from torchao.prototype.mx_formats.mx_tensor import to_mx as ao_to_mx

    out = {}
    for name, fn in (
        ("to_mx", ao_to_mx),
        ("triton_to_mxfp8_dim0", getattr(kernels, "triton_to_mxfp8_dim0", None)),
        ("triton_to_mxfp8_dim1", getattr(kernels, "triton_to_mxfp8_dim1", None)),
        ("mxfp8_quantize_cuda", getattr(kernels, "mxfp8_quantize_cuda", None)),
    ):
        if fn is None:
            out[name] = "missing"
            continue
        param = inspect.signature(fn).parameters.get("scaling_mode")
        if param is None or param.default is inspect.Parameter.empty:
            out[name] = "no default"
        else:
            default = param.default
            out[name] = str(getattr(default, "value", default)).lower()
    return out


def narrow_cast(fmt: FloatFormat) -> Implementation | None:
    """torchao's float32 -> unpacked FP4/FP6 helper as a conformance ``Implementation`` (bfloat16
    and float16 inputs go through float32, which is exact); None for other formats."""
    from ..casts.implementations import Implementation

    fmt = as_format(fmt)
    if fmt.name not in _NARROW_HELPERS:
        return None
    torchao = require_torchao()
    from torchao.prototype.mx_formats import kernels

    fn = getattr(kernels, _NARROW_HELPERS[fmt.name][0])
    return Implementation(f"torchao.{fn.__name__}", torchao.__version__, lambda x: fn(x.float()).view(torch.uint8))


def narrow_decode(codes: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """torchao's unpacked FP4/FP6 -> float32 helper."""
    fmt = as_format(fmt)
    require_torchao()
    from torchao.prototype.mx_formats import kernels

    return getattr(kernels, _NARROW_HELPERS[fmt.name][1])(codes)


def pack_uint4(codes: torch.Tensor) -> torch.Tensor:
    """torchao's FP4 packing (``mx_formats.kernels.pack_uint4``)."""
    require_torchao()
    from torchao.prototype.mx_formats.kernels import pack_uint4 as ao_pack

    return ao_pack(codes)


def nvfp4_per_tensor_scale(amax: torch.Tensor) -> torch.Tensor:
    """torchao's ``nvfp4_tensor.per_tensor_amax_to_scale``."""
    require_torchao()
    from torchao.prototype.mx_formats.nvfp4_tensor import per_tensor_amax_to_scale

    return per_tensor_amax_to_scale(amax)


def nvfp4_quantize(x: torch.Tensor, tensor_scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torchao's ``nvfp4_tensor.nvfp4_quantize``: (UE4M3 block scale bytes, packed FP4 bytes)."""
    require_torchao()
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize as ao_quantize

    scale, data = ao_quantize(x, 16, per_tensor_scale=tensor_scale)
    return scale.view(torch.uint8), data.view(torch.uint8)


def nvfp4_dequantize(
    x: torch.Tensor, tensor_scale: torch.Tensor | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``NVFP4Tensor.to_nvfp4(x, per_tensor_scale=...).dequantize(dtype)``."""
    require_torchao()
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    return NVFP4Tensor.to_nvfp4(x, per_tensor_scale=tensor_scale).dequantize(dtype)


# torchao's GemmInputRole values -> fp8ref's names for the GEMM they meet in
_GEMMS = {
    ("input", "weight"): "output",
    ("grad_output", "weight"): "grad_input",
    ("grad_output", "input"): "grad_weight",
}


@contextlib.contextmanager
def float8_gemm_operands() -> Iterator[list[dict]]:
    """Inside the block, every float8 GEMM torchao's Float8Linear runs is recorded: which GEMM it
    is (``output``, ``grad_input``, ``grad_weight``, told by torchao's operand roles) and both
    operands' values as the GEMM sees them (codes / scale, float32), A (rows, contraction) and
    B (contraction, cols). Written against torchao 0.17-0.18 (``float8_ops.preprocess_addmm``,
    which every float8 mm and addmm goes through, emulated or not)."""
    require_torchao()
    from torchao.float8 import float8_ops

    seen: list[dict] = []
    original = float8_ops.preprocess_addmm

    def spy(a, b):
        roles = (str(a._gemm_input_role.value), str(b._gemm_input_role.value))
        seen.append(
            {
                "gemm": _GEMMS.get(roles, "/".join(roles)),
                "a": a._data.float() / a._scale,
                "b": b._data.float() / b._scale,
                "a_dtype": _fmt_name(a._data.dtype),
                "b_dtype": _fmt_name(b._data.dtype),
            }
        )
        return original(a, b)

    float8_ops.preprocess_addmm = spy
    try:
        yield seen
    finally:
        float8_ops.preprocess_addmm = original


@contextlib.contextmanager
def float8_kernel_operands() -> Iterator[list[dict]]:
    """Inside the block, every float8 GEMM torchao's Float8Linear hands ``torch._scaled_mm`` is
    recorded as the kernel gets it: ``a`` (rows, contraction) and ``b`` (contraction, cols) codes
    (uint8) after torchao's preparation (``pad_inner_dim``'s padding of the contraction dim), and
    ``a_in`` / ``b_in``, the operands' codes before it. Written against torchao 0.17-0.18
    (``float8_ops.preprocess_addmm``)."""
    require_torchao()
    from torchao.float8 import float8_ops

    seen: list[dict] = []
    original = float8_ops.preprocess_addmm

    def spy(a, b):
        a_data, a_scale, b_data, b_scale = original(a, b)
        seen.append(
            {
                "a_in": a._data.view(torch.uint8).clone(),
                "b_in": b._data.view(torch.uint8).clone(),
                "a": a_data.view(torch.uint8).clone(),
                "b": b_data.view(torch.uint8).clone(),
            }
        )
        return a_data, a_scale, b_data, b_scale

    float8_ops.preprocess_addmm = spy
    try:
        yield seen
    finally:
        float8_ops.preprocess_addmm = original
