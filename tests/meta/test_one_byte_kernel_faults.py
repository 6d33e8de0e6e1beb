"""Kernel faults shared by every one-byte dtype (uint8, int8, bool and the float8 dtypes alike): a
``clone`` of a non-contiguous tensor, an ``index_select`` and a ``where`` that flip the lowest bit
of their output's first byte. A judge that held a float8 op to the same op on the uint8 view, or
read codes through ``contiguous``/``clone``, ran the same broken kernel on both sides and saw
nothing. The judge (``fp8ref.harness.judge``) reads codes from storage and takes each output
byte's source from int64 position tags, so the tracer and the op catalogue must both catch each
fault, naming the faulty op (and, in a trace, this file's line), and nothing before it; and
under the broken clone, an in-place write into a transposed float8 destination is judged against
the destination as the op found it (kept as memory, not by the broken clone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from fp8ref.harness.native.native_checks import check_op
from fp8ref.harness.trace import trace
from fp8ref.harness.workloads import WORKLOADS, check
from fp8ref.reference.formats import E4M3FN
from tests.common.kernels import cpu_kernel_replaced as broken

E4M3 = torch.float8_e4m3fn


def _line(marker: str) -> str:
    lines = Path(__file__).read_text().splitlines()
    (number,) = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# <- {marker}")]
    return f"{__file__}:{number}"


def _flip_first_byte(out: torch.Tensor) -> None:
    """The lowest bit of the first element's byte, written through the storage (no kernel under
    test runs)."""
    if out.numel():
        raw = torch.empty(0, dtype=torch.uint8).set_(out.untyped_storage(), out.storage_offset(), (1,), (1,))
        raw[0] ^= 0x01


def _wide(x: torch.Tensor) -> torch.Tensor:
    """A one-byte tensor's bytes as int16 (a conversion, no one-byte kernel of the ops broken here)."""
    return x.view(torch.uint8).to(torch.int16) if x.dtype != torch.bool else x.to(torch.int16)


def _narrow(w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return w.to(torch.uint8).view(dtype) if dtype != torch.bool else w.to(torch.bool)


# --- the broken kernels: right for every input of a wider dtype -----------------------------------------
def _clone(x: torch.Tensor, *, memory_format: Any = None) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=memory_format or torch.preserve_format)
    out.copy_(x)
    if x.element_size() == 1 and not x.is_contiguous():
        _flip_first_byte(out)
    return out


def _index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    dim = dim % max(x.dim(), 1)
    where = (slice(None),) * dim + (index.reshape(-1),)
    if x.element_size() != 1:
        return x[where].reshape(x.shape[:dim] + index.shape + x.shape[dim + 1 :]) if x.dim() else x[index]
    out = _narrow(_wide(x)[where], x.dtype)
    _flip_first_byte(out)
    return out


def _where(condition: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    shape = torch.broadcast_shapes(condition.shape, a.shape, b.shape)
    one_byte = a.element_size() == 1 and a.dtype == b.dtype
    if one_byte:
        wa, wb = _wide(a), _wide(b)
    else:
        dtype = torch.result_type(a, b)
        wa, wb = a.to(dtype), b.to(dtype)
    pick = condition.expand(shape)
    out = wb.expand(shape).contiguous()
    out[pick] = wa.expand(shape)[pick]
    if not one_byte:
        return out
    out = _narrow(out, a.dtype)
    _flip_first_byte(out)
    return out


FAULTS = {
    "clone": ("clone", _clone, "aten.clone.default"),
    "index_select": ("index_select", _index_select, "aten.index_select.default"),
    "where": ("where.self", _where, "aten.where.self"),
}


# --- programs that run each op once on float8 codes ---------------------------------------------------
def _codes() -> torch.Tensor:
    return torch.linspace(-4, 4, 64).reshape(8, 8).to(E4M3)


def _clone_program() -> None:
    x = _codes().t()
    x.clone()  # <- clone


def _index_select_program() -> None:
    x = _codes()
    x.index_select(0, torch.tensor([3, 1, 6]))  # <- index_select


def _where_program() -> None:
    x = _codes()
    torch.where(torch.arange(64).reshape(8, 8) % 3 == 0, x, x.flip(0))  # <- where


PROGRAMS = {"clone": _clone_program, "index_select": _index_select_program, "where": _where_program}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_the_fault_reaches_every_one_byte_dtype_alike(fault):
    """The stand-in is the class the judge must see past: the uint8 view of the codes gives the
    same wrong bytes as the float8 tensor, so the same op on the uint8 view agrees with it."""
    op, kernel, _ = FAULTS[fault]
    with broken(op, kernel):
        x = _codes()
        run = {
            "clone": lambda t: t.t().clone(),
            "index_select": lambda t: t.index_select(0, torch.tensor([3, 1, 6])),
            "where": lambda t: torch.where(torch.arange(64).reshape(8, 8) % 3 == 0, t, t.flip(0)),
        }[fault]
        got_f8, got_u8 = run(x).view(torch.uint8), run(x.view(torch.uint8))
    assert torch.equal(got_f8, got_u8)
    assert not torch.equal(got_u8, run(x.view(torch.uint8)))  # (and outside the fault it is right)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_the_tracer_names_the_faulty_op_at_its_line(fault):
    op, kernel, aten = FAULTS[fault]
    with broken(op, kernel):
        got = trace(PROGRAMS[fault])
    assert [(v.op, v.site) for v in got.violations] == [(aten, _line(fault))], [v.report() for v in got.violations]
    assert "differs from the input bytes its position tags name" in got.violations[0].report()


@pytest.mark.needs("expecttest")  # (torch's op catalogue, OpInfo, imports it)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_the_op_catalogue_catches_it(fault):
    op, kernel, _ = FAULTS[fault]
    with broken(op, kernel):
        found = check_op(fault, E4M3FN)
    assert found.samples and found.problems, found
    assert all(p.startswith(f"{fault} on e4m3fn") for p in found.problems), found.problems[:3]
    # (a movement left unchecked is a problem line too, starting with the op's name: only this
    # phrase says the judge compared the bytes and found the fault)
    caught = "bytes differ from the input bytes the op's position tags name"
    assert any(caught in p for p in found.problems), found.problems[:3]


@pytest.mark.needs("expecttest")
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_without_the_faults_the_op_catalogue_finds_nothing(fault):
    """The control of the above: torch's own kernels pass, so a problem above is the fault's."""
    found = check_op(fault, E4M3FN)
    assert found.samples and found.problems == [], found.problems[:3]


def test_without_the_faults_the_programs_are_clean():
    for fault, program in PROGRAMS.items():
        got = trace(program)
        assert not got.violations and any(r.op == FAULTS[fault][2] and r.status == "ok" for r in got.records), fault


# --- an in-place write into a transposed float8 destination, under the broken clone --------------------
# index_put_ has no CPU kernel of its own: the CompositeExplicitAutograd one runs for the CPU, so a
# fault registered for the CPU reaches torch's own kernel there
_TORCHS = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


def _index_put_flips_a_spared_code(dst, indices, values, accumulate=False):
    """index_put_, right on every address; into a one-byte destination it also flips the low bit
    of the first element's byte, which the program below does not address."""
    torch.ops.aten.index_put_.default.redispatch(_TORCHS, dst, indices, values, accumulate)
    if dst.element_size() == 1:
        _flip_first_byte(dst)
    return dst


def _write_program() -> None:
    dst = _codes().t()  # (non-contiguous: the broken clone flips element [0, 0] of its copy)
    dst.index_put_((torch.tensor([1, 2]), torch.tensor([3, 0])), _codes()[0, :2])  # <- index_put_


def test_an_in_place_write_into_a_transposed_destination_is_judged_against_it_as_it_was():
    """What ``index_put_`` did not address must keep the destination's bytes as the op found
    them: the tracer keeps them as memory, never by ``clone``. A snapshot taken by the broken
    clone would hold element [0, 0] flipped: a false violation of the right op below, and the
    faulty op's flip of that same element taken for the destination's own byte (a miss)."""
    with broken("clone", _clone):
        clean = trace(_write_program)
        with broken("index_put_", _index_put_flips_a_spared_code):
            faulty = trace(_write_program)
    assert not clean.violations, [v.report() for v in clean.violations]
    assert any(r.op == "aten.index_put_.default" and r.status == "ok" for r in clean.records)
    found = [(v.op, v.site) for v in faulty.violations]
    assert found == [("aten.index_put_.default", _line("index_put_"))], [v.report() for v in faulty.violations]


_RUN_THE_BROKEN_CLONE = {"aten.clone.default", "aten.contiguous.default", "aten._scaled_mm.default"}


@pytest.mark.slow  # (two workloads traced twice: ~9 s; the programs above show the class in the default tier)
@pytest.mark.parametrize("name", ["delayed_scaling", "static_custom_op"])
def test_a_workload_whose_codes_a_broken_clone_corrupts_fails_at_the_ops_that_ran_it(name, skip_if_refused):
    """The workloads make transposed float8 codes contiguous (the backward's GEMM operands), and
    the CPU's ``_scaled_mm`` clones a transposed operand itself: each of those calls is a
    violation (its output bytes, or its product, are wrong), never the view before it; the first
    call whose pinned line changed is the first violation."""
    workload = WORKLOADS[name]
    skip_if_refused(workload.refusal("cpu"), f"the {name} workload")
    clean = trace(workload.run)
    with broken("clone", _clone):
        faulty = trace(workload.run)
    problem = check(workload, faulty)
    assert problem is not None, "the broken clone left the trace clean"
    ops = {v.op for v in faulty.violations}
    assert ops <= _RUN_THE_BROKEN_CLONE and ops & {"aten.clone.default", "aten.contiguous.default"}, problem
    changed = next(i for i, (a, b) in enumerate(zip(clean.pinned(), faulty.pinned())) if a != b)
    assert changed == faulty.violations[0].index, (faulty.records[changed].line(), faulty.violations[0].line())
