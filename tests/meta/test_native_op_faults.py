"""Native float8 ops: a cat that rewrites NaN payloads, a cat that reads a transposed or stepped
input in memory order (only the layouts reach it: torch's samples are contiguous), a mul of two
same-shape tensors rounded toward zero (only the catalogue's later samples reach it: its first
ones broadcast against a 0-d tensor, which the CPU refuses), a copy_ that writes a transposed
destination in memory order or stores one element past a strided one, an index_select that loses
-0's sign, a fill that rounds toward zero, an FNUZ fill that writes -0.0 as the NaN code 0x80, an abs that
keeps every sign, an eq that says NaN == NaN, an isnan that misses the negative NaN; each through
the checks tests/cpu/install/test_native_ops.py runs (a stand-in of torch's OpInfo with its op
replaced, or a stand-in write path). And Python scalars in float8 arithmetic
(tests/cpu/install/test_native_scalars.py): a product rounded toward zero, a comparison whose
scalar is truncated into float8, NaN == NaN against a scalar, a product in bfloat16 against the
promotion table."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.native import native_ops
from fp8ref.harness.native.native_checks import check_copy, check_op, check_written
from fp8ref.harness.native.scalar_ops import check_scalar_op
from fp8ref.harness.native.strided_writes import WRITES, check_strided_writes
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E4M3FNUZ, FloatFormat
from tests.common.inside_install import inside

pytestmark = pytest.mark.needs("expecttest")


def _codes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def _nan_payloads_rewritten(*args, **kwargs):
    out = torch.cat(*args, **kwargs)
    codes = _codes(out).clone()
    codes[codes == 0xFF] = 0x7F
    return codes.view(out.dtype).view(out.shape)


def _negative_zero_lost(x, dim, index):
    out = torch.index_select(x, dim, index)
    codes = _codes(out).clone()
    codes[codes == 0x80] = 0x00
    return codes.view(out.dtype).view(out.shape)


def _abs_keeps_every_sign(x):
    return x.clone()


def _eq_nan_equals_nan(a, b):
    return torch.eq(a, b) | (torch.isnan(a.float()) & torch.isnan(b.float()))


def _isnan_misses_negative_nan(x):
    return torch.isnan(x) & (_codes(x).view(x.shape) != 0xFF)


def _in_memory_order(t: torch.Tensor) -> torch.Tensor:
    """``t``'s storage read as if ``t`` were contiguous: what a kernel that ignores strides sees."""
    strides = [1] * t.dim()
    for i in range(t.dim() - 2, -1, -1):
        strides[i] = strides[i + 1] * t.shape[i + 1]
    return t.as_strided(t.shape, strides, t.storage_offset())


def _cat_ignores_strides(tensors, *args, **kwargs):
    return torch.cat([_in_memory_order(t) for t in tensors], *args, **kwargs)


# torch 2.13's CPU mul refuses a 0-d float8 operand, which the catalogue's first samples have:
# the stand-in does so on every install, from inside torch's folder, as the kernel does
_REFUSE_0D = inside(
    "torch",
    "def f(a, b):\n"
    "    if a.dim() == 0 or b.dim() == 0:\n"
    "        raise NotImplementedError(\"'mul_cpu_reduced_float' not implemented for 'Float8_e4m3fn'\")\n",
)


def _mul_toward_zero_tensors(a, b):
    _REFUSE_0D(a, b)
    exact = _values(a, E4M3FN) * _values(b, E4M3FN)  # (two codes' product: exact in float64)
    return _into(exact, "rtz").view(torch.broadcast_shapes(a.shape, b.shape))


OP_FAULTS = {
    "cat rewrites NaN payloads": ("cat", _nan_payloads_rewritten),
    "cat reads a transposed or stepped input in memory order": ("cat", _cat_ignores_strides),
    "mul of two same-shape tensors rounds toward zero": ("mul", _mul_toward_zero_tensors),
    "index_select loses the sign of -0": ("index_select", _negative_zero_lost),
    "abs keeps every sign": ("abs", _abs_keeps_every_sign),
    "eq says NaN == NaN": ("eq", _eq_nan_equals_nan),
    "isnan misses the negative NaN": ("isnan", _isnan_misses_negative_nan),
}


def _fill_toward_zero(fmt: FloatFormat) -> Callable[[float], torch.Tensor]:
    def write(v: float) -> torch.Tensor:
        code = encode(torch.tensor([v] * 4, dtype=torch.float32), fmt, rounding="rtz")
        return code.view(fmt.torch_dtype())

    return write


def _fnuz_negative_zero_as_nan(fmt: FloatFormat) -> Callable[[float], torch.Tensor]:
    def write(v: float) -> torch.Tensor:
        t = torch.full((4,), v, dtype=torch.float64).to(fmt.torch_dtype())
        if v == 0 and str(v).startswith("-"):
            t = torch.full((4,), 0x80, dtype=torch.uint8).view(fmt.torch_dtype())
        return t

    return write


WRITE_FAULTS = {
    "fill rounds toward zero": (E4M3FN, _fill_toward_zero),
    "an FNUZ fill writes -0.0 as 0x80": (E4M3FNUZ, _fnuz_negative_zero_as_nan),
}


def _values(t: torch.Tensor, fmt: FloatFormat = E4M3FN) -> torch.Tensor:
    return decode(_codes(t), fmt).double()


def _into(x: torch.Tensor, rounding: str, fmt: FloatFormat = E4M3FN) -> torch.Tensor:
    return encode(x.float(), fmt, rounding=rounding).view(fmt.torch_dtype())


def _mul_toward_zero(t, s):
    return _into(_values(t) * s, "rtz")


def _eq_scalar_truncated(t, s):
    v = torch.tensor([float(s)], dtype=torch.float64)
    s8 = decode(encode(v.float(), E4M3FN, rounding="rtz"), E4M3FN).double() if v.isfinite().all() else v
    return _values(t) == s8


def _eq_nan_equals_nan_scalar(t, s):
    v = _values(t)
    return (v == s) | (torch.isnan(v) & (s != s))


def _mul_in_bfloat16(t, s):
    return (_values(t) * s).to(torch.bfloat16)


SCALAR_FAULTS = {
    "t * s rounds toward zero": ("mul", _mul_toward_zero),
    "t == s truncates the scalar into float8": ("eq", _eq_scalar_truncated),
    "t == nan is True for NaN codes": ("eq", _eq_nan_equals_nan_scalar),
    "t * s gives bfloat16": ("mul", _mul_in_bfloat16),
}


def _copy_writes_in_memory_order(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return _in_memory_order(dst).copy_(src)


def _copy_overruns_by_one(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """A right copy, then one more element stored just past the destination's last one (a vector
    store that overruns a sliced or stepped view into the gap after it)."""
    dst.copy_(src)
    last = dst.storage_offset() + sum((n - 1) * st for n, st in zip(dst.shape, dst.stride()))
    storage = dst.as_strided((dst.untyped_storage().nbytes() // dst.element_size(),), (1,), 0)
    if last + 1 < storage.numel():
        storage[last + 1 : last + 2] = dst.reshape(-1)[-1:]
    return dst


_REFUSE_STRIDED = inside(
    "torch",
    "def f(dst):\n"
    "    if not dst.is_contiguous():\n"
    "        raise NotImplementedError(\"'copy_' not implemented for strided 'Float8_e4m3fn'\")\n",
)


def _copy_refuses_strided_destinations(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    _REFUSE_STRIDED(dst)
    return dst.copy_(src)


COPY_FAULTS = {
    "copy_ writes a transposed destination in memory order": _copy_writes_in_memory_order,
    "copy_ stores one element past a strided destination's last": _copy_overruns_by_one,
    "copy_ refuses a strided destination it copied into before": _copy_refuses_strided_destinations,
}


def _fill_over_the_span(dst: torch.Tensor, v: float, mask: torch.Tensor) -> torch.Tensor:
    """fill_ as a kernel that takes the destination for dense: numel elements from its first one,
    gaps of a sliced or stepped view included, its last elements missed."""
    span = dst.as_strided((dst.numel(),), (1,), dst.storage_offset())
    return span.fill_(v)


def _index_put_first_index_only(dst: torch.Tensor, v: float, mask: torch.Tensor) -> torch.Tensor:
    """index_put_ that reads a transposed destination's rows in memory order: right on contiguous."""
    target = _in_memory_order(dst) if not dst.is_contiguous() else dst
    rows, cols = torch.tensor([0, 1, 1]), torch.tensor([2, 0, 3])
    return target.index_put_((rows, cols), torch.tensor(v).to(dst.dtype))


def _fill_refuses_strided_destinations(dst: torch.Tensor, v: float, mask: torch.Tensor) -> torch.Tensor:
    if dst.element_size() == 1:  # (a float8 kernel's refusal: float32 destinations are filled)
        _REFUSE_STRIDED(dst)
    return dst.fill_(v)


def _fill_overruns_by_one(dst: torch.Tensor, v: float, mask: torch.Tensor) -> torch.Tensor:
    """A right fill_, then one more element stored just past the destination's last one (a vector
    store that overruns a sliced or stepped view into the gap after it): every element of the view
    is right, so only the bytes outside it show the fault."""
    dst.fill_(v)
    last = dst.storage_offset() + sum((n - 1) * st for n, st in zip(dst.shape, dst.stride()))
    storage = dst.as_strided((dst.untyped_storage().nbytes() // dst.element_size(),), (1,), 0)
    if last + 1 < storage.numel():
        storage[last + 1 : last + 2] = dst.reshape(-1)[-1:]
    return dst


STRIDED_WRITE_FAULTS = {
    "fill_ refuses a strided destination it fills contiguous": ("fill_", _fill_refuses_strided_destinations),
    "fill_ writes a strided destination as if dense": ("fill_", _fill_over_the_span),
    "index_put_ addresses a strided destination in memory order": ("index_put_", _index_put_first_index_only),
    "fill_ stores one element past a strided destination's last": ("fill_", _fill_overruns_by_one),
}
FAULTS = [*OP_FAULTS, *WRITE_FAULTS, *SCALAR_FAULTS, *COPY_FAULTS, *STRIDED_WRITE_FAULTS]


def _on_float8_only(broken, real):
    """The fault in the float8 kernel alone, as a real one would be: the uint8 and float64 ways
    the checks compare with run torch's own kernels."""

    def op(*args, **kwargs):
        leaves = [a for a in args if isinstance(a, torch.Tensor)] + [
            t for a in args if isinstance(a, (list, tuple)) for t in a if isinstance(t, torch.Tensor)
        ]
        return (
            broken(*args, **kwargs)
            if any(t.element_size() == 1 and t.is_floating_point() for t in leaves)
            else real(*args, **kwargs)
        )

    return op


def native_op_fault_caught(fault: str) -> bool:
    if fault in COPY_FAULTS:
        return bool(check_copy(E4M3FN, copy=COPY_FAULTS[fault])[0])
    if fault in STRIDED_WRITE_FAULTS:
        how, write = STRIDED_WRITE_FAULTS[fault]
        return bool(check_strided_writes(E4M3FN, writes={how: write})[0])
    if fault in SCALAR_FAULTS:
        name, fn = SCALAR_FAULTS[fault]
        return bool(check_scalar_op(name, E4M3FN, fn=fn).problems)
    if fault in WRITE_FAULTS:
        fmt, make = WRITE_FAULTS[fault]
        return check_written(fmt, paths={"fill_": make(fmt)})["fill_"].startswith("differs")
    name, broken = OP_FAULTS[fault]
    real = native_ops.catalogue()[name]
    standin = copy.copy(real)
    standin.op = _on_float8_only(broken, real.op)
    if native_ops.judge(standin, E4M3FN).word not in ("runs", "partial"):
        return False  # (judged refused: tests/cpu/install/test_native_ops.py would skip it)
    return bool(check_op(name, E4M3FN, op=standin).problems)


def test_the_checks_pass_torchs_own_ops():
    assert native_ops.catalogue_refusal() is None
    for name, _ in OP_FAULTS.values():
        assert check_op(name, E4M3FN).problems == [], name
    assert check_copy(E4M3FN) == ([], {})
    assert check_strided_writes(E4M3FN, writes={k: WRITES[k] for k in ("fill_", "index_put_")}) == ([], {})
    with pytest.raises(ValueError, match=r"writes: expected names among .*, got \['fil_'\]"):
        check_strided_writes(E4M3FN, writes={"fil_": WRITES["fill_"]})


def test_a_wrong_call_in_a_strided_write_fails_never_reads_as_the_installs_refusal():
    """An index past the destination's end: torch raises for float8 and for float32 alike, so it is
    the call's fault (fp8ref's), not the install declining float8."""

    def out_of_range(dst, v, mask):
        return dst.index_put_((torch.tensor([9], device=dst.device),), torch.tensor(v).to(dst.dtype))

    with pytest.raises(IndexError):
        check_strided_writes(E4M3FN, writes={"index_put_": out_of_range})


def test_the_scalar_check_passes_the_definitions_own_answers():
    """The stand-ins' correct twins: the product rounded to nearest, the comparison exact."""
    assert check_scalar_op("mul", E4M3FN, fn=lambda t, s: _into(_values(t) * s, "rne")).problems == []
    assert check_scalar_op("eq", E4M3FN, fn=lambda t, s: _values(t) == s).problems == []


@pytest.mark.parametrize("fault", FAULTS)
def test_a_native_op_fault_is_caught(fault):
    assert native_op_fault_caught(fault), f"{fault}: not caught"


def _adds_in_bfloat16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() + b.float()).to(torch.bfloat16)


def test_an_addition_that_promotes_against_the_table_is_caught():
    """A release that lets float8 + float32 run, but computes it in bfloat16: the promotion
    check (tests/cpu/install/test_surface.py) says so."""
    from fp8ref.harness.native.surface import mixed_add

    word = mixed_add(E4M3FN, torch.float32, add=_adds_in_bfloat16)
    assert word.startswith("gives bfloat16"), word
