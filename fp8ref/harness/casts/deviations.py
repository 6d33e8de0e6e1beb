"""Known deviations of implementations from the format definition, named and bounded.

The definition decides (docs/design.md): when an implementation's cast differs from the codec and
the codec is right by the definition (``reference.definition``, gfloat), only that implementation
is excused, and only for exactly the inputs and the answer written here. Its mismatches are then
counted as a deviation in its ``CastReport`` (printed at the end of the run) instead of failing
the test, and the behaviour profile records which answer the install gives (``observe``), so an
install that starts or stops deviating changes one pinned key. Any other mismatch still fails.

Each entry says which implementations (by name: ``torch-cpu``, ``torch-cuda``, ``ml_dtypes``)
showed it on which versions, and which did not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ...reference.codec import encode
from ...reference.formats import E8M0FNU, FloatFormat
from ..judge.stored import stored_codes
from .implementations import Implementation

__all__ = [
    "Deviation",
    "DEVIATIONS",
    "explain",
    "observe",
    "for_format",
    "MxScaleDeviation",
    "MX_SCALE_DEVIATIONS",
    "MxElementDeviation",
    "MX_ELEMENT_DEVIATIONS",
    "explain_mx_scales",
    "NativeOpDeviation",
    "NATIVE_OP_DEVIATIONS",
    "BlockFp8Deviation",
    "BLOCK_FP8_DEVIATIONS",
    "Pow2ScaleDeviation",
    "POW2_SCALE_DEVIATIONS",
    "explain_pow2_scales",
]


@dataclasses.dataclass(frozen=True)
class Deviation:
    key: str  # a short name, also the profile key's last part
    fmt: FloatFormat
    impls: tuple[str, ...]  # implementation-name prefixes it may excuse
    what: str  # the deviation in one line: inputs, definition, their answer
    seen: str  # the versions it was observed on, and those it was not
    inputs: Callable[[torch.Tensor], torch.Tensor]  # mask: the inputs it concerns
    answer: Callable[[torch.Tensor], torch.Tensor]  # the codes a deviating implementation gives there
    probe: Callable[[], torch.Tensor]  # a few inputs that tell the two answers apart

    def applies_to(self, impl: Implementation) -> bool:
        return impl.name.startswith(self.impls)


def _e8m0_band(x: torch.Tensor) -> torch.Tensor:
    a = x.float()
    return (a > 2.0**-127) & (a < 1.5 * 2.0**-127)


E8M0_F32_SUBNORMAL_GRID = Deviation(
    key="f32_subnormal_grid",
    fmt=E8M0FNU,
    impls=("torch", "ml_dtypes"),
    what=(
        "E8M0 of x in (2^-127, 1.5 x 2^-127) (float32 subnormals; bfloat16 0x0041-0x005F) gives 2^-126 "
        "(0x01): rounded on float32's 2^-126 grid; the nearest value, by the definition, is 2^-127 (0x00)"
    ),
    seen="torch 2.13.0 (CPU), ml_dtypes 0.6.0; not ml_dtypes 0.7.0, gfloat 0.5.2 (they follow the definition)",
    inputs=_e8m0_band,
    answer=lambda x: torch.ones(x.shape, dtype=torch.uint8),
    probe=lambda: torch.tensor([0x00400001, 0x00500000, 0x005FFFFF], dtype=torch.int32).view(torch.float32),
)

DEVIATIONS: tuple[Deviation, ...] = (E8M0_F32_SUBNORMAL_GRID,)


def for_format(fmt: FloatFormat) -> tuple[Deviation, ...]:
    return tuple(d for d in DEVIATIONS if d.fmt == fmt)


def explain(
    impl: Implementation, fmt: FloatFormat, x: torch.Tensor, got: torch.Tensor, bad: torch.Tensor
) -> tuple[torch.Tensor, dict[str, int]]:
    """Of the mismatching inputs ``bad``, those a known deviation of ``impl`` explains (its inputs,
    its answer), and how many per deviation."""
    explained = torch.zeros_like(bad)
    counts: dict[str, int] = {}
    for d in for_format(fmt):
        if not d.applies_to(impl) or not bool(bad.any()):
            continue
        mine = bad & d.inputs(x) & (got == d.answer(x))
        n = int(mine.sum())
        if n:
            explained |= mine
            counts[d.key] = n
    return explained, counts


def observe(impl: Implementation, d: Deviation) -> str:
    """What ``impl`` gives on the deviation's probe inputs: ``definition``, ``deviates: <what>``,
    or ``other: ...`` when it gives neither answer."""
    x = d.probe()
    got = impl.cast(x).reshape(-1)
    if torch.equal(got, encode(x, d.fmt)):
        return "definition"
    if torch.equal(got, d.answer(x)):
        return f"deviates: {d.what.split(':')[0]}"
    return "other: codes " + " ".join(f"0x{int(c):02x}" for c in got)


# --- MX block scales ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MxScaleDeviation:
    """A known deviation of an MX scale computation: for ``mode``, the blocks whose amax lies in
    ``inputs`` get ``answer`` (E8M0 codes) instead of the definition's scale."""

    key: str
    mode: str
    what: str
    seen: str
    answer: Callable[[torch.Tensor, FloatFormat], torch.Tensor]  # (float32 amax, element format) -> codes


def _rceil_through_float32_log2(amax: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    # the deviating computation, written out: amax / max and its log2, each rounded to float32
    e = torch.ceil(torch.log2(amax.float() / torch.tensor(fmt.max, dtype=torch.float32)))
    return (e.clamp(-127, 127) + 127).to(torch.uint8)


TORCHAO_RCEIL_F32_LOG2 = MxScaleDeviation(
    key="rceil_f32_log2",
    mode="rceil",
    what=(
        "RCEIL of an amax just above max_elem x 2^k (within float32's log2 resolution at k) gives 2^k: "
        "torchao's eager fallback takes ceil(log2(amax / max)) in float32, whose log2 rounds k + tiny to k; "
        "by the definition (cuBLAS's cvt.rp to UE8M0 agrees) it is 2^(k+1)"
    ),
    seen="torchao 0.18.0 eager on CPU with torch 2.13.0 (float32 blocks; a bfloat16 amax is never that close)",
    answer=_rceil_through_float32_log2,
)

MX_SCALE_DEVIATIONS: tuple[MxScaleDeviation, ...] = (TORCHAO_RCEIL_F32_LOG2,)


@dataclasses.dataclass(frozen=True)
class MxElementDeviation:
    """A known deviation of the MX element cast under a given scale: the elements of the blocks
    ``inputs`` marks (by their E8M0 scale code) get ``answer`` (values) instead of the definition's."""

    key: str
    what: str
    seen: str
    inputs: Callable[[torch.Tensor], torch.Tensor]  # E8M0 scale codes -> mask of blocks it concerns
    answer: Callable[[torch.Tensor], torch.Tensor]  # the definition's element values -> theirs


TORCHAO_MX_TINY_SCALE_CLAMPED = MxElementDeviation(
    key="mx_tiny_scale_clamped_divisor",
    what=(
        "an MX block whose scale is 2^-127 (E8M0 code 0) has its elements divided by float32's smallest normal "
        "2^-126 instead of 2^-127: each element is half what the stored scale implies (the definition: the "
        "element is x / scale, rounded once)"
    ),
    seen="torchao 0.17.0 and 0.18.0 (to_mx, FLOOR) on the CPU with torch 2.9.1, 2.13.0 and 2.15.0",
    inputs=lambda codes: codes == 0,
    answer=lambda values: values / 2,
)

MX_ELEMENT_DEVIATIONS: tuple[MxElementDeviation, ...] = (TORCHAO_MX_TINY_SCALE_CLAMPED,)


def explain_mx_scales(
    mode: str, fmt: FloatFormat, amax: torch.Tensor, got: torch.Tensor, bad: torch.Tensor
) -> tuple[torch.Tensor, dict[str, int]]:
    """Of the blocks whose E8M0 scale ``got`` differs from the definition (``bad``), those a known
    MX scale deviation for ``mode`` explains (its exact answer), and how many per deviation."""
    explained = torch.zeros_like(bad)
    counts: dict[str, int] = {}
    for d in MX_SCALE_DEVIATIONS:
        if d.mode != str(mode) or not bool(bad.any()):
            continue
        mine = bad & (got == d.answer(amax, fmt))
        if int(mine.sum()):
            explained |= mine
            counts[d.key] = int(mine.sum())
    return explained, counts


@dataclasses.dataclass(frozen=True)
class NativeOpDeviation:
    """A native float8 op's known answer where the definition gives another: excused for exactly
    the elements ``answer`` marks (given the op's output, the sample's input codes and the
    format), nowhere else; ``native_checks`` counts them and the profile records whether the
    install still gives it (``native.deviation.<key>``)."""

    key: str
    op: str
    formats: tuple[str, ...]
    what: str
    seen: str
    # (output, the input codes, the format, the op's output on the uint8 view when asked) -> the
    # elements where the output is the deviating answer
    answer: Callable[[torch.Tensor, list[torch.Tensor], FloatFormat, Callable[[], Any] | None], torch.Tensor]


def _input_code(codes_in: list[torch.Tensor], out: torch.Tensor) -> torch.Tensor | None:
    """An elementwise unary op's input codes, shaped as its output (None when they are not)."""
    if len(codes_in) != 1 or codes_in[0].numel() != out.numel():
        return None
    return codes_in[0].reshape(out.shape).cpu()


def _abs_keeps_the_sign_of_negative_zero(
    out: torch.Tensor, codes_in: list[torch.Tensor], fmt: FloatFormat, on_codes: Callable[[], Any] | None = None
) -> torch.Tensor:
    code = _input_code(codes_in, out)
    if code is None or out.dtype != fmt.torch_dtype():
        return torch.zeros(out.shape, dtype=torch.bool)
    return (code == 0x80) & (stored_codes(out) == 0x80)  # (read from storage: judge.stored)


def _isfinite_of_the_e8m0_nan(
    out: torch.Tensor, codes_in: list[torch.Tensor], fmt: FloatFormat, on_codes: Callable[[], Any] | None = None
) -> torch.Tensor:
    code = _input_code(codes_in, out)
    if code is None or out.dtype != torch.bool:
        return torch.zeros(out.shape, dtype=torch.bool)
    return (code == 0xFF) & out


def _counts_the_bytes(
    out: torch.Tensor, codes_in: list[torch.Tensor], fmt: FloatFormat, on_codes: Callable[[], Any] | None = None
) -> torch.Tensor:
    """Where ``out`` is the count of nonzero *bytes* (the op on the uint8 view), not of nonzero values."""
    bytes_count = on_codes() if on_codes is not None else None
    if bytes_count is None or bytes_count.shape != out.shape or out.dtype.is_floating_point:
        return torch.zeros(out.shape, dtype=torch.bool)
    return out.cpu() == bytes_count


NATIVE_OP_DEVIATIONS: tuple[NativeOpDeviation, ...] = (
    NativeOpDeviation(
        key="abs_keeps_negative_zero",
        op="abs",
        formats=("e4m3fn", "e5m2"),
        what="abs(-0.0) gives -0.0 (0x80) on tensors of 64 elements or more (the CPU's vectorized path); the "
        "definition (IEEE 754 abs clears the sign) gives +0.0 (0x00), as smaller tensors do",
        seen="torch 2.9.1, 2.13.0, 2.14.1 and 2.15.0 on the CPU (a negative NaN keeps its sign there too: any NaN "
        "is a NaN)",
        answer=_abs_keeps_the_sign_of_negative_zero,
    ),
    NativeOpDeviation(
        key="isfinite_e8m0_nan",
        op="isfinite",
        formats=("e8m0fnu",),
        what="isfinite is True for E8M0's NaN code 0xFF; the definition (0xFF is NaN) gives False",
        seen="torch 2.9.1, 2.13.0 and 2.14.1 on the CPU, every tensor size; torch 2.15.0 gives False",
        answer=_isfinite_of_the_e8m0_nan,
    ),
    NativeOpDeviation(
        key="count_nonzero_e8m0_smallest",
        op="count_nonzero",
        formats=("e8m0fnu",),
        what="count_nonzero does not count E8M0's code 0x00, which is 2^-127 (E8M0 has no zero): it counts the "
        "nonzero bytes, where the definition counts every code",
        seen="torch 2.9.1, 2.13.0 and 2.15.0 on the CPU (where count_nonzero runs: a 0-d tensor, or with a dim)",
        answer=_counts_the_bytes,
    ),
)


# --- transformers' fine-grained FP8 (block checkpoints) -----------------------------------------


@dataclasses.dataclass(frozen=True)
class BlockFp8Deviation:
    """A known answer of transformers' fine-grained FP8 where the block-checkpoint definition
    (``reference.block_fp8``) gives another. ``answer`` computes the deviating answer exactly
    (each takes its own arguments: the check that excuses it says which); the check excuses an
    element only where the install gives that answer, and fails anywhere else."""

    key: str
    what: str
    seen: str
    answer: Callable[..., torch.Tensor]
    # where the deviating answer is an error rather than values: (weight shape, scale grid shape)
    # -> the error exactly as ``refusals.describe`` writes it, or None where it gives values
    error: Callable[[tuple[int, ...], tuple[int, ...]], str | None] = lambda shape, grid: None


def _scale_through_the_reciprocal(amax: torch.Tensor) -> torch.Tensor:
    # the deviating computation, written out: torch computes 448 / t as t.reciprocal() * 448
    a = amax.float()
    safe = torch.where(a > 0, a, torch.ones_like(a))
    return torch.where(a > 0, torch.reciprocal(safe) * 448.0, torch.ones_like(a))


def _ue8m0_through_float32_log2(scale_inv: torch.Tensor) -> torch.Tensor:
    # the deviating computation, written out: ceil of a float32 log2 of the float32 inverse
    return torch.pow(2.0, torch.ceil(torch.log2(scale_inv.float())))


def _loader_blocks_from_the_grid(values: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    # the deviating computation, written out: the block taken as (rows / grid rows, cols / grid cols)
    rows, cols = values.shape[-2:]
    gm, gn = scale_inv.shape[-2:]
    if rows % gm or cols % gn:  # (there its answer is a refusal, never values: NaN matches nothing)
        return torch.full_like(values, float("nan"))
    bm, bn = rows // gm, cols // gn
    return (values.reshape(-1, gm, bm, gn, bn) * scale_inv.float().reshape(-1, gm, 1, gn, 1)).reshape(values.shape)


def _loader_error_where_the_grid_does_not_divide(shape: tuple[int, ...], grid: tuple[int, ...]) -> str | None:
    # the deviating check, written out: the shape over the grid must divide, else a ValueError
    rows, cols = shape[-2:]
    gm, gn = grid[-2:]
    if rows % gm or cols % gn:
        return f"ValueError: Weight shape ({rows}, {cols}) not divisible by scale grid ({gm}, {gn})."
    return None


def _backward_scale_in_the_gradient_dtype(
    values: torch.Tensor, scale_inv_expanded: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    # the deviating computation, written out: both factors rounded to the gradient's dtype first
    return values.to(dtype) * scale_inv_expanded.to(dtype)


TRANSFORMERS_SCALE_THROUGH_RECIPROCAL = BlockFp8Deviation(
    key="scale_through_reciprocal",
    what=(
        "a block's scale 448 / amax is float32(float32(1 / amax) x 448), two roundings, one float32 ulp off the "
        "correctly rounded quotient for some amax (and its stored inverse with it): Fp8Quantize writes "
        "448 / amax with a Python number over a tensor, which torch computes as amax.reciprocal() * 448"
    ),
    seen="transformers 5.24.0 (Fp8Quantize) on torch 2.9.1, 2.13.0 and 2.15.0",
    answer=_scale_through_the_reciprocal,
)
TRANSFORMERS_UE8M0_F32_LOG2 = BlockFp8Deviation(
    key="ue8m0_f32_log2",
    what=(
        "a UE8M0 inverse scale just above 2^k (within float32's log2 resolution at k) is stored as 2^k: "
        "Fp8Quantize takes ceil(log2(inv)) in float32, whose log2 rounds k + tiny to k; by the definition the "
        "inverse is 2^(k+1), so the block's largest element saturates to 448 instead of encoding amax / 2^(k+1)"
    ),
    seen="transformers 5.24.0 (Fp8Quantize with scale_fmt='ue8m0'), on torch 2.9.1, 2.13.0 and 2.15.0",
    answer=_ue8m0_through_float32_log2,
)
TRANSFORMERS_LOADER_BLOCKS_FROM_GRID = BlockFp8Deviation(
    key="loader_blocks_from_grid",
    what=(
        "Fp8Dequantize (from_pretrained(..., dequantize=True)) takes the block as the weight's shape over the "
        "scale grid's: a weight whose last blocks are ragged (448 x 200 in 128 x 128 blocks: a 4 x 2 grid) is "
        "read in 112 x 100 blocks, wrong without an error; a shape the grid does not divide (DeepSeek-V3's "
        "576-row kv_a_proj_with_mqa: 5 grid rows) is refused (ValueError)"
    ),
    seen="transformers 5.24.0; its backward's _dequantize_fp8_weight reads the same weights right",
    answer=_loader_blocks_from_the_grid,
    error=_loader_error_where_the_grid_does_not_divide,
)
TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE = BlockFp8Deviation(
    key="backward_scale_in_grad_dtype",
    what=(
        "_dequantize_fp8_weight (the weight FP8LinearFunction.backward multiplies a LoRA step's output gradient "
        "by) rounds the float inverse scale to the gradient's dtype before the product: in bfloat16 the weight "
        "differs from the checkpoint's (code x scale_inv rounded once) by up to 2^-8 relative; float32 and "
        "UE8M0 (power-of-two) scales are exact"
    ),
    seen="transformers 5.24.0",
    answer=_backward_scale_in_the_gradient_dtype,
)
BLOCK_FP8_DEVIATIONS: tuple[BlockFp8Deviation, ...] = (
    TRANSFORMERS_SCALE_THROUGH_RECIPROCAL,
    TRANSFORMERS_UE8M0_F32_LOG2,
    TRANSFORMERS_LOADER_BLOCKS_FROM_GRID,
    TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE,
)


# --- power-of-two rounding of float8 scales ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Pow2ScaleDeviation:
    """A known deviation of the power-of-two rounding of a float32 float8 scale from the
    definition (the largest power of two <= the scale): the scales ``inputs`` marks get ``answer``
    instead; excused there, for that answer, and nowhere else."""

    key: str
    what: str
    seen: str
    inputs: Callable[[torch.Tensor], torch.Tensor]  # mask over float32 scales
    answer: Callable[[torch.Tensor], torch.Tensor]  # what a deviating implementation gives there


def _one_ulp_below_a_power_of_two(scale: torch.Tensor) -> torch.Tensor:
    s = scale.float()
    above = torch.nextafter(s, torch.full_like(s, float("inf")))
    # the next float32 up is 2^k exactly: its frexp significand is 0.5
    return torch.isfinite(s) & (s > 0) & torch.isfinite(above) & (torch.frexp(above)[0] == 0.5)


def _the_power_of_two_above(scale: torch.Tensor) -> torch.Tensor:
    s = scale.float()
    return torch.nextafter(s, torch.full_like(s, float("inf")))


TORCHAO_POW2_F32_LOG2 = Pow2ScaleDeviation(
    key="pow2_f32_log2",
    what=(
        "a float32 scale one ulp below 2^k rounds 'down' to 2^k, above the scale: torchao's "
        "_round_scale_down_to_power_of_2 takes exp2(floor(log2(scale))) with a float32 log2, which rounds "
        "k - 2^-24/ln 2 to k (k >= 3 and k <= -2); by the definition (the largest power of two <= the scale) "
        "it is 2^(k-1). An amax one float32 ulp above 448 / 2^k gives such a scale"
    ),
    seen=(
        "torchao 0.18.0 with torch 2.13.0 on the CPU (every k in -60..-2 and 3..60); torchao 0.17.0 computes it "
        "the same way (float8_utils.py at v0.17.0), and with torch 2.9.1 + torchao 0.17.0 and 2.15.0 + 0.18.0 "
        "the strict xfail that pinned it on three such amax values xfailed (docs/version-matrix.md's counts)"
    ),
    inputs=_one_ulp_below_a_power_of_two,
    answer=_the_power_of_two_above,
)

POW2_SCALE_DEVIATIONS: tuple[Pow2ScaleDeviation, ...] = (TORCHAO_POW2_F32_LOG2,)


def explain_pow2_scales(
    scale: torch.Tensor, got: torch.Tensor, bad: torch.Tensor
) -> tuple[torch.Tensor, dict[str, int]]:
    """Of the float32 ``scale``s whose power-of-two rounding ``got`` differs from the definition
    (``bad``), those a known deviation explains (its inputs, its exact answer), and how many per
    deviation."""
    explained = torch.zeros_like(bad)
    counts: dict[str, int] = {}
    for d in POW2_SCALE_DEVIATIONS:
        if not bool(bad.any()):
            continue
        mine = bad & d.inputs(scale) & (got.float() == d.answer(scale))
        if int(mine.sum()):
            explained |= mine
            counts[d.key] = int(mine.sum())
    return explained, counts
