"""Which check exercises each member of torchao's FP8 surface (``surface.members``), or why it is
out of scope: the one table ``tests/cpu/install/test_torchao_surface.py`` holds the install to.

A row is ``member -> checks`` (test ids, ``path::function``, each of which must exist) or
``member -> "out of scope: <reason>"``. ``Class.*`` covers every field of a dataclass that is out
of scope as a whole (an inference workflow's config); a checked class, and every enum, has a row
per member, so a field or member a release adds fails the coverage test naming it until it gets
a check or a reason here.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["COVERAGE", "OUT_OF_SCOPE", "row", "uncovered", "account", "absent_checks"]

OUT_OF_SCOPE = "out of scope: "

_LINEAR = "tests/cpu/install/test_torchao_linear.py::"
_SCALES = "tests/cpu/install/test_torchao_scales.py::"
_MX_LINEAR = "tests/cpu/install/test_mx_linear.py::"
_RECIPES = _SCALES + "test_recipe_table_matches_fp8ref_recipes"
_BITWISE = _LINEAR + "test_emulated_float8linear_is_bitwise_equal_without_bias"
_TO_MX = _SCALES + "test_mx_scales_and_elements_are_bitwise_equal"
_MX_MODES = "tests/cpu/install/test_mx_modes.py::test_every_block_size_scales_like_the_definition_of_its_mode"
_MX_GEMM = _MX_LINEAR + "test_mx_weight_in_f_linear_matches_the_reference_gemm"
_GPU_KERNELS = "tests/gpu/test_mx_kernels.py::"
_NVFP4_LAYOUTS = _MX_LINEAR + "test_nvfp4_quantizes_alike_in_every_scale_layout"
_INFERENCE = (
    OUT_OF_SCOPE + "an inference quantization config (torchao's quantize_ workflow), not FP8 training; the "
    "MXTensor and NVFP4Tensor it builds are held to the reference in tests/cpu/install/test_mx_linear.py"
)

COVERAGE: dict[str, tuple[str, ...] | str] = {
    # --- float8 training: the six operand casts of the three GEMMs, their GEMMs, the options -----
    **{
        f"Float8LinearConfig.{field}": (_RECIPES, _BITWISE)
        for field in (
            "cast_config_input",
            "cast_config_input_for_grad_weight",
            "cast_config_weight",
            "cast_config_weight_for_grad_input",
            "cast_config_grad_output",
            "cast_config_grad_output_for_grad_weight",
        )
    },
    **{
        f"Float8LinearConfig.gemm_config_{gemm}": (
            _RECIPES,
            _LINEAR + "test_float8linear_with_bias_matches_within_output_rounding",
        )
        for gemm in ("output", "grad_input", "grad_weight")
    },
    "Float8LinearConfig.enable_fsdp_float8_all_gather": (
        "tests/cpu/install/test_fsdp_float8.py::test_every_float8_all_gather_is_the_reference_cast_of_the_full_weight",
    ),
    "Float8LinearConfig.pad_inner_dim": (_LINEAR + "test_pad_inner_dim_pads_k_with_zeros",),
    "Float8LinearConfig.emulate": (_BITWISE, _LINEAR + "test_float8linear_with_bias_matches_within_output_rounding"),
    "Float8LinearConfig.force_recompute_fp8_weight_in_bwd": (
        _LINEAR + "test_force_recompute_fp8_weight_in_bwd_leaves_training_bitwise_unchanged",
    ),
    "Float8LinearConfig.round_scales_to_power_of_2": (_SCALES + "test_scales_are_bitwise_equal", _RECIPES),
    "CastConfig.scaling_type": (_RECIPES,),
    "CastConfig.scaling_granularity": (_RECIPES, _SCALES + "test_scales_are_bitwise_equal"),
    "CastConfig.target_dtype": (_RECIPES, _SCALES + "test_dynamic_cast_data_and_scale_are_bitwise_equal"),
    "Float8GemmConfig.use_fast_accum": (
        _RECIPES,
        "tests/cpu/install/test_scaled_mm.py::test_every_out_dtype_matches_the_exact_product",
    ),
    "Float8TypeConfig": (_RECIPES,),  # (no fields: torchao's e4m3/e5m2 dtype choice, read in each recipe)
    "Float8LinearRecipeName.TENSORWISE": (_RECIPES, _BITWISE),
    "Float8LinearRecipeName.ROWWISE": (_RECIPES, _BITWISE),
    "Float8LinearRecipeName.ROWWISE_WITH_GW_HP": (_RECIPES, _BITWISE),
    "ScalingType.DYNAMIC": (_RECIPES, _SCALES + "test_dynamic_cast_data_and_scale_are_bitwise_equal"),
    "ScalingType.DISABLED": (_RECIPES, _BITWISE),  # (rowwise_with_gw_hp's high-precision grad_weight)
    "ScalingGranularity.TENSORWISE": (_SCALES + "test_scales_are_bitwise_equal",),
    "ScalingGranularity.AXISWISE": (_SCALES + "test_scales_are_bitwise_equal",),
    # --- MX and NVFP4 ---------------------------------------------------------------------------
    **{f"ScaleCalculationMode.{m}": (_MX_MODES, _TO_MX) for m in ("FLOOR", "RCEIL", "CEIL", "EVEN")},
    "KernelPreference.EMULATED": (_MX_GEMM,),
    "KernelPreference.AUTO": ("tests/gpu/test_mx_linear.py::test_mx_linear_matches_the_reference_gemm",),
    **{
        f"KernelPreference.{m}": OUT_OF_SCOPE + "MXTensor and NVFP4Tensor take AUTO or EMULATED only (torchao 0.17-"
        "0.18 assert it); this member picks a kernel of torchao's float8 inference tensors (torchao.quantization)"
        for m in ("TORCH", "MSLK", "TRITON")
    },
    "MXFP8Dim0CastKernelChoice.TORCH": (_TO_MX,),
    "MXFP8Dim0CastKernelChoice.TRITON": (_GPU_KERNELS + "test_mx_cast_kernel_matches_to_mx_and_fp8ref",),
    "MXFP8Dim1CastKernelChoice.TORCH": (_TO_MX,),
    **{
        f"MXFP8Dim1CastKernelChoice.{m}": (
            _GPU_KERNELS + "test_every_dim1_cast_kernel_choice_casts_like_the_reference",
        )
        for m in ("TRITON", "CUDA", "CUTEDSL")
    },
    "MXFP8Dim1CastKernelChoice.FLYDSL": OUT_OF_SCOPE + "AMD's FlyDSL kernel (ROCm, CDNA3 and later); fp8ref's GPU "
    "suite runs on NVIDIA H100, H200 and B200",
    "QuantizeTensorToMXKwargs.elem_dtype": (_MX_GEMM,),
    "QuantizeTensorToMXKwargs.block_size": (_MX_GEMM, _MX_MODES),
    "QuantizeTensorToMXKwargs.scaling_mode": (_MX_GEMM,),
    "QuantizeTensorToMXKwargs.kernel_preference": (_MX_GEMM,),
    "QuantizeTensorToMXKwargs.is_swizzled_scales": (
        _MX_LINEAR + "test_swizzled_mx_scales_are_the_reference_layout_both_ways",
    ),
    "QuantizeTensorToNVFP4Kwargs.block_size": (
        _NVFP4_LAYOUTS,
        "tests/gpu/test_mx_linear.py::test_nvfp4_linear_matches_the_reference_gemm",
    ),
    "QuantizeTensorToNVFP4Kwargs.is_swizzled_scales": (_NVFP4_LAYOUTS,),
    "QuantizeTensorToNVFP4Kwargs.use_triton_kernel": (_NVFP4_LAYOUTS,),  # (its cuda case)
    "QuantizeTensorToNVFP4Kwargs.use_dynamic_per_tensor_scale": (
        "tests/gpu/test_mx_linear.py::test_nvfp4_linear_matches_the_reference_gemm",
        "tests/cpu/reference/test_nvfp4.py::test_torchao_per_tensor_scale_is_the_derived_one",
    ),
    "MXDynamicActivationMXWeightConfig.*": _INFERENCE,
    "NVFP4DynamicActivationNVFP4WeightConfig.*": _INFERENCE,
    "NVFP4WeightOnlyConfig.*": _INFERENCE,
}


def row(member: str) -> tuple[str, ...] | str | None:
    """The member's row: its checks, its reason, or None when the table has neither."""
    if not isinstance(member, str):
        raise TypeError(f"member: expected a surface member name (str), got {type(member).__name__}")
    if member in COVERAGE:
        return COVERAGE[member]
    return COVERAGE.get(member.split(".", 1)[0] + ".*")


def uncovered(members: dict[str, str] | list[str]) -> list[str]:
    """The members with no row."""
    return sorted(m for m in members if row(m) is None)


def account(members: dict[str, str] | list[str]) -> list[str]:
    """The end-of-run account: members checked, out of scope (with the reasons), and uncovered."""
    rows = {m: row(m) for m in members}
    checked = [m for m, r in rows.items() if isinstance(r, tuple)]
    out = {m: r for m, r in rows.items() if isinstance(r, str)}
    lines = [f"torchao's FP8 surface: {len(rows)} members; {len(checked)} checked, {len(out)} out of scope"]
    by_reason: dict[str, list[str]] = {}
    for m, reason in out.items():
        by_reason.setdefault(reason.removeprefix(OUT_OF_SCOPE), []).append(m)
    lines += [f"  {', '.join(ms)}: {reason}" for reason, ms in by_reason.items()]
    missing = uncovered(members)
    lines.append(f"  covered by nothing: {len(missing)}" + (f" ({', '.join(missing)})" if missing else ""))
    return lines


def absent_checks(table: dict[str, tuple[str, ...] | str], root: Path) -> list[str]:
    """The table's own honesty: the rows' test ids (``path::function``, relative to the checkout
    ``root``) with no such file or no such test function in it, so the table cannot claim a check
    nobody wrote."""
    absent = []
    for member, checks in table.items():
        for check in checks if isinstance(checks, tuple) else ():
            path, _, function = check.partition("::")
            source = root / path
            found = source.is_file() and re.search(rf"^def {re.escape(function)}\(", source.read_text(), re.M)
            if not found:
                absent.append(f"{member}: {check}")
    return absent
