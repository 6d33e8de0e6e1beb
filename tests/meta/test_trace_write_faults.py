"""Ops that write into a float8 argument, traced: their check needs what the argument held before
the op ran, so the tracer must judge each against the arguments as the op found them.

- ``index_put_`` broken for float8 destinations: the addressed codes right, one code it does not
  address changed too. Judged against the destination as it was, the changed code is a
  violation; judged against the destination as the op left it, the op's own answer, it is not.
- ``mul_`` of two float8 tensors, torch's own: each code the product rounded once. Judged against
  the destination as the op left it (the product squared), it would be a violation.

Nothing here depends on how the tracer keeps the arguments (a clone, the storage's bytes), only
on the verdicts."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from fp8ref.harness.trace import Record, trace

E4M3 = torch.float8_e4m3fn
# index_put_ has no CPU kernel of its own: the CompositeExplicitAutograd one runs for the CPU, so
# the fault (registered for the CPU) reaches torch's own kernel there
_TORCHS = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


def _line(marker: str) -> str:
    """``file:line`` of the line of this file that ends with ``# <- marker``."""
    lines = Path(__file__).read_text().splitlines()
    (number,) = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# <- {marker}")]
    return f"{__file__}:{number}"


def _index_put_touches_a_neighbour(dst, indices, values, accumulate=False):
    """index_put_, right on every address; into a float8 destination it also flips the low bit of
    the first code it does not address (a vector store one lane too wide)."""
    torch.ops.aten.index_put_.default.redispatch(_TORCHS, dst, indices, values, accumulate)
    if dst.dtype == E4M3 and dst.dim() == 1:
        hit = torch.zeros(dst.shape, dtype=torch.bool)
        hit[indices[0].cpu()] = True
        spared = (~hit).nonzero().reshape(-1)
        if len(spared):
            dst.view(torch.uint8)[int(spared[0])] ^= 0x01
    return dst


@contextlib.contextmanager
def _broken_index_put() -> Iterator[None]:
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # (torch warns that a kernel is overridden: that is the point)
        warnings.simplefilter("ignore", UserWarning)
        lib.impl("index_put_", _index_put_touches_a_neighbour, "CPU")
    try:
        yield
    finally:
        lib._destroy()


def _index_put_program() -> None:
    weight = torch.tensor([1.0, 2.0, 3.0, 4.0, -0.5, 0.75]).to(E4M3)  # a cached float8 weight
    weight.index_put_((torch.tensor([1, 3]),), torch.tensor([0.25, -6.0]).to(E4M3))  # <- index_put_


def _mul_program() -> None:
    weight = torch.tensor([1.0, 1.125, -3.0, 0.3125, 448.0, 2.0**-9]).to(E4M3)
    weight.mul_(torch.tensor([1.5, 1.25, 0.75, -2.0, 0.5, 3.0]).to(E4M3))  # <- mul_


def _judged(records: list[Record], op: str) -> Record:
    (record,) = [r for r in records if r.op == op]
    return record


def write_fault_caught() -> bool:
    """Whether the broken index_put_ is the trace's one violation, at the line that called it."""
    with _broken_index_put():
        found = trace(_index_put_program)
    return [(v.op, v.site) for v in found.violations] == [("aten.index_put_.default", _line("index_put_"))]


def test_a_write_into_a_float8_argument_outside_the_addressed_codes_is_caught():
    with _broken_index_put():
        found = trace(_index_put_program)
    record = _judged(found.records, "aten.index_put_.default")
    assert record.status == "violation" and record.site == _line("index_put_"), record.report()
    assert [(v.op, v.site) for v in found.violations] == [("aten.index_put_.default", _line("index_put_"))]
    assert record.difference is not None, record.report()


def test_the_programs_trace_clean_on_torchs_own_kernels():
    """The same programs, torch's own kernels: each write checked and right (so the violation above
    is the fault's, and an in-place op is judged against what it found, not what it left)."""
    for program, op in ((_index_put_program, "aten.index_put_.default"), (_mul_program, "aten.mul_.Tensor")):
        found = trace(program)
        assert not found.violations, "\n".join(v.report() for v in found.violations)
        record = _judged(found.records, op)
        assert record.status == "ok" and record.kind != "unchecked", record.report()


# --- a write beside the view: fill_ into a slice that also stores one byte past its end --------------
def _fill_one_past_the_view(self, value):
    """fill_, right on every element of the view; into a float8 slice it also flips the low bit of
    the byte just past the view's last element (a store one element too long)."""
    self.copy_(torch.tensor(float(value)).expand(self.shape))  # (copy_: no kernel this fault replaces)
    if self.dtype == E4M3 and self.numel():
        last = self.storage_offset() + sum((n - 1) * s for n, s in zip(self.shape, self.stride()))
        raw = torch.empty(0, dtype=torch.uint8).set_(self.untyped_storage(), last + 1, (1,), (1,))
        if last + 1 < self.untyped_storage().nbytes():
            raw[0] ^= 0x01
    return self


@contextlib.contextmanager
def _broken_fill() -> Iterator[None]:
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        lib.impl("fill_.Scalar", _fill_one_past_the_view, "CPU")
    try:
        yield
    finally:
        lib._destroy()


def _fill_a_slice() -> None:
    x = torch.linspace(-2, 2, 64).reshape(8, 8).to(E4M3)
    x[2:4].fill_(0.5)  # <- fill
    x.t().contiguous()


def test_a_write_beside_the_view_is_a_violation_at_the_op_that_wrote_it():
    """The view's own elements are right, so only the bytes beside it tell: the fill_ is the
    violation, not a later op that reads the changed byte."""
    with _broken_fill():
        got = trace(_fill_a_slice)
    assert [(v.op, v.site) for v in got.violations] == [("aten.fill_.Scalar", _line("fill"))], [
        v.report() for v in got.violations
    ]
    assert "outside the view it was given" in got.violations[0].problem


def test_torchs_own_fill_of_a_slice_is_clean():
    got = trace(_fill_a_slice)
    assert not got.violations and any(r.op == "aten.fill_.Scalar" and r.status == "ok" for r in got.records)


# --- codes on a plain subclass (as_subclass) are read, not waved through ---------------------------
class _Tagged(torch.Tensor):
    """A subclass with no dispatch of its own: its storage is real memory, its ops plain ops."""


def _clone_a_tagged() -> None:
    x = torch.linspace(-2, 2, 64).reshape(8, 8).to(E4M3).as_subclass(_Tagged).t()
    x.clone()  # <- tagged


def test_a_plain_subclass_is_judged_like_a_tensor():
    from tests.meta.test_one_byte_kernel_faults import _clone, broken

    clean = trace(_clone_a_tagged)
    assert not clean.unchecked, [r.line() for r in clean.unchecked]
    with broken("clone", _clone):
        got = trace(_clone_a_tagged)
    assert [(v.op, v.site) for v in got.violations] == [("aten.clone.default", _line("tagged"))]


def test_float8_bytes_viewed_as_uint8_are_not_counted_as_checked():
    """x.view(torch.uint8) leaves float8: there is nothing to judge, so it must not read as a pass."""
    got = trace(lambda: torch.ones(4, 4).to(E4M3).t().view(torch.uint8))
    (view,) = [r for r in got.records if r.op == "aten.view.dtype"]
    assert view.status == "unchecked" and "reinterpreted as uint8" in view.reason, view.line()
