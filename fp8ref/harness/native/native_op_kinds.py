"""Which check each native float8 op that runs is held to, or why it is left unchecked: the one
table ``native_checks`` reads and ``tests/cpu/install/test_native_ops.py`` holds every op the
install runs to (an op that runs on some float8 dtype and is named in neither table fails, naming
it and the torch that runs it).

The kinds (``native_checks`` says how each is checked):

- ``movement``: the op moves, copies, views or gathers codes: each output byte is the input byte
  the op's int64 position tags name (``judge.movement``), on every code;
- ``written``: the op writes values into float8 (a fill, a factory, a constant pad): each element
  is the value the op computes in float64 on the definition's values, cast by the definition
  (``judge.casts``: rounded once or through float32, saturated or not out of range),
  any NaN for a NaN;
- ``values``: arithmetic, comparisons and conversions: the op on the definition's values (float64)
  gives the exact result, rounded once into the output's dtype by the codec (round to nearest
  even); where the exact result overflows the format, the answer (saturate or not) is observed,
  not asserted, and any NaN stands for a NaN;
- ``converts``: a conversion to an integer dtype: as ``values`` where the value is finite and in
  the integer's range (elsewhere C++ leaves the answer undefined).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["KINDS", "KIND", "SAMPLE_KIND", "UNCHECKED", "kind_of"]

KINDS = ("movement", "written", "values", "converts")

_MOVEMENT = """
H T mH mT __getitem__ _chunk_cat alias_copy as_strided as_strided.partial_views as_strided_copy
as_strided_scatter atleast_1d atleast_2d atleast_3d block_diag broadcast_tensors broadcast_to
cartesian_prod cat chunk clone column_stack combinations conj conj_physical contiguous diag
diag_embed diagflat diagonal diagonal_copy diagonal_scatter dsplit dstack expand expand_as
expand_copy fft.fftshift fft.ifftshift flatten fliplr flipud hsplit hstack index_put index_select
linalg.diagonal masked_select meshgrid.list_of_tensors meshgrid.variadic_tensors movedim narrow
narrow_copy nn.functional.embedding nn.functional.pad.circular permute permute_copy ravel real
repeat repeat_interleave reshape reshape_as resolve_conj resolve_neg roll rot90 select
select_scatter slice slice_scatter split split.list_args split_with_sizes split_with_sizes_copy
squeeze squeeze.multiple squeeze_copy stack t t_copy tensor_split tile transpose transpose_copy
unbind unbind_copy unflatten unfold unfold_copy unsafe_chunk unsafe_split unsqueeze unsqueeze_copy
view view_as view_copy vsplit vstack where flip flatten.using_ints gather scatter take
take_along_dim masked_scatter index_copy index_fill narrow.tensor
"""
_WRITTEN = """
fill full full_like new_full new_ones new_zeros ones ones_like zeros zeros_like zero_ scalar_tensor
eye linspace linspace.tensor_overload logspace logspace.tensor_overload nn.functional.pad.constant
constant_pad_nd masked_fill
"""
_VALUES = """
abs positive neg eq ne lt le gt ge isnan isinf isfinite isreal isposinf isneginf signbit equal all
any nonzero nonzero_static searchsorted bool half float double bfloat16 cfloat cdouble chalf to
item float_power outer kron diff mul add sub max min maximum minimum sort argsort __rmul__ inner
isclose count_nonzero sum_to_size cumsum cumprod cummax cummin aminmax argmax argmin kthvalue mode
topk max.reduction_with_dim min.reduction_with_dim index_add
"""
_CONVERTS = """
byte char short int long
"""

KIND: dict[str, str] = {
    op: kind
    for kind, names in (("movement", _MOVEMENT), ("written", _WRITTEN), ("values", _VALUES), ("converts", _CONVERTS))
    for op in names.split()
}


def _accumulates(sample: Any, kind: str) -> str:
    """index_put with accumulate=True sums the values a repeated index receives, one rounding per
    addition in the order torch takes them: a reduction (left unchecked, like the others), not
    movement."""
    args, kwargs = sample.ways["float8"][1], sample.ways["float8"][2]
    accumulate = kwargs.get("accumulate", args[2] if len(args) > 2 else False)
    return "unchecked" if accumulate is True else kind


def _adds_into(sample: Any, kind: str) -> str:
    """index_add adds ``alpha * source`` into the rows its index names: arithmetic (``values``: one
    rounding of the exact sum) where each row is named once; where an index repeats, a row receives
    one rounding per addition in the order torch takes them: a reduction (left unchecked)."""
    args = sample.ways["float8"][1]
    index: Any = args[1] if len(args) > 1 else None
    repeats = hasattr(index, "unique") and int(index.unique().numel()) < int(index.numel())
    return "unchecked" if repeats else kind


def _reduces(sample: Any, kind: str) -> str:
    """scatter with ``reduce`` ("add", "multiply") combines the values it writes with the
    destination's, one rounding per combination in the order torch takes them: arithmetic, a
    reduction (left unchecked), never movement; without it scatter moves codes."""
    return "unchecked" if sample.ways["float8"][2].get("reduce") is not None else kind  # (keyword-only)


def _foreign(value: Any) -> bool:
    """Whether ``value``, written into a float8 tensor, is a value to encode rather than codes to
    move: a Python number, or a floating-point tensor of another dtype (torch casts it into the
    output's format; on the uint8 view it would land as an integer, or promote the output)."""
    if isinstance(value, (int, float)):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and value.is_floating_point() and dtype.itemsize != 1


def _fills_value(sample: Any, kind: str) -> str:
    """index_fill writes ``value`` (its third argument) into the rows its index names: codes moved
    where it is a float8 tensor; a Python number or a wider tensor is written (cast as ``.to``
    casts it: on the uint8 view the number 1 would be the byte 0x01, not 1.0's code)."""
    args, kwargs = sample.ways["float8"][1], sample.ways["float8"][2]
    value = kwargs.get("value", args[2] if len(args) > 2 else None)
    return "written" if _foreign(value) else kind


def _scatters(sample: Any, kind: str) -> str:
    """scatter with ``reduce``: a reduction (``_reduces``); with a Python number for its ``value``
    it writes that value (as index_fill does); with a ``src`` tensor (of the output's dtype, as
    scatter requires) it moves codes."""
    kind = _reduces(sample, kind)
    args, kwargs = sample.ways["float8"][1], sample.ways["float8"][2]
    value = kwargs.get("value", args[2] if len(args) > 2 else None)
    return "written" if kind == "movement" and isinstance(value, (int, float)) else kind


def _selects_a_value(sample: Any, kind: str) -> str:
    """where picks each element from ``self`` or ``other``: codes moved where both are float8; a
    0-d floating tensor of another dtype (``torch.where(mask, x_f8, torch.tensor(0.0))``, whose
    result stays float8) is written into the format (on the uint8 view it promotes the result to
    its dtype instead). The condition is bool: not a value."""
    float8, args, kwargs = sample.ways["float8"]
    tensors = [t for t in (float8, *args, *kwargs.values()) if hasattr(t, "dtype")]
    return "written" if any(_foreign(t) for t in tensors) else kind


# the ops whose kind depends on the sample's arguments (the same layout in the tracer and the
# native-op suite: the op's first tensor, then the rest of its positional arguments)
SAMPLE_KIND: dict[str, Callable[[Any, str], str]] = {
    "index_put": _accumulates,
    "index_add": _adds_into,
    "scatter": _scatters,
    "index_fill": _fills_value,
    "where": _selects_a_value,
}

_GEMM = (
    "a float8 GEMM without scales (torch computes it in float32 and rounds the result once); FP8 training "
    "multiplies through torch._scaled_mm, checked within derived bounds in tests/cpu/install/test_scaled_mm.py"
)
_REDUCTION = (
    "a reduction whose summation order (and so its float32 rounding) is the implementation's; no FP8 training "
    "path reduces float8 tensors with it (amax is taken in high precision)"
)
_RANDOM = "random: its answer is torch's generator's draw, not a function of the codes"
_UNINITIALIZED = "uninitialized memory: it writes no value to check"

UNCHECKED: dict[str, str] = {
    **{op: _GEMM for op in "addbmm addmm addmm.decomposed mm linalg.matrix_power linalg.multi_dot".split()},
    **{op: _GEMM for op in "nn.functional.linear tensordot einsum matmul bmm baddbmm addmv mv dot".split()},
    "__rmatmul__": _GEMM,
    "index_reduce.prod": _REDUCTION,
    **{op: _REDUCTION for op in "linalg.vector_norm masked.norm masked.prod nn.functional.pdist".split()},
    **{op: _REDUCTION for op in "nn.functional.adaptive_avg_pool1d linalg.svd svd sum prod mean".split()},
    **{
        op: _RANDOM
        for op in (
            "nn.functional.alpha_dropout nn.functional.dropout nn.functional.dropout2d nn.functional.dropout3d "
            "nn.functional.feature_alpha_dropout.with_train nn.functional.feature_alpha_dropout.without_train "
            "normal randn randint rand bernoulli"
        ).split()
    },
    **{
        op: _UNINITIALIZED
        for op in "empty empty_like empty_permuted empty_strided new_empty new_empty_strided resize_ resize_as_".split()
    },
    "torch._scaled_mm": "checked in tests/cpu/install/test_scaled_mm.py (scalings, scale forms, accumulator, bias)",
    "torch._scaled_mm_v2": "the scaled GEMM's second API: its scalings are pinned with _scaled_mm's (scaled_mm.*)",
}


def kind_of(op: str) -> str | None:
    """The op's kind (``KINDS``), ``unchecked`` when ``UNCHECKED`` gives a reason, else None."""
    if not isinstance(op, str):
        raise TypeError(f"op: expected an op name (str), got {type(op).__name__}")
    if op in KIND:
        return KIND[op]
    return "unchecked" if op in UNCHECKED else None
