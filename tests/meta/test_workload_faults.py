"""A fault only a workload reaches: torch's CPU ``copy_`` broken for the in-place re-quantization
of a cached float8 weight (a ``copy_`` from a wider dtype into float8 storage it has written
before keeps the old code wherever the new one is one step away: a write-skipping cache done
wrong). A one-shot cast (``Tensor.to``) and a ``copy_`` into a fresh float8 buffer are right, so
the tracer's own programs stay clean; the ``static_custom_op`` workload (modded-nanogpt's cached
weights, re-quantized after each optimizer step) must fail its check naming ``aten.copy_`` and
the workload's line that re-quantizes.

And one only an MoE dispatch reaches: torch's CPU ``index_select`` broken for float8 where an
index repeats (a kernel that writes each source row once, as if the indices were unique: a later
occurrence left zero). A top-2 router sends each token to two experts, so the ``moe_dispatch``
workload's FP8 dispatch repeats every token it keeps: its check must fail naming
``aten.index_select`` at the dispatch's line; a gather of distinct rows stays clean."""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Iterator

import torch

from fp8ref.harness.profiles.upgrade_report import build, render_markdown
from fp8ref.harness.trace import Trace, trace
from fp8ref.harness.workloads import WORKLOADS, check, moe_dispatch, profile_keys
from fp8ref.harness.workloads import static_custom_op as workload_module
from fp8ref.harness.workloads.base import source_file

FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
# copy_ has no CPU kernel of its own: the CompositeExplicitAutograd one runs for the CPU, so the
# fault (registered for the CPU) reaches torch's own kernel there
_TORCHS = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


@contextlib.contextmanager
def _requantization_skips_one_step_changes() -> Iterator[None]:
    written: dict[int, torch.Tensor] = {}  # (held: a pointer it wrote is never reused meanwhile)

    def copy_(dst: torch.Tensor, src: object, non_blocking: bool = False) -> torch.Tensor:
        src = src if isinstance(src, torch.Tensor) else torch.tensor(src)
        cast = dst.dtype in FLOAT8 and src.dtype not in FLOAT8
        rewrite = cast and dst.data_ptr() in written
        old = dst.view(torch.uint8).to(torch.int16) if rewrite else None
        torch.ops.aten.copy_.default.redispatch(_TORCHS, dst, src, non_blocking)
        if cast:
            written[dst.data_ptr()] = dst
        if old is not None:
            codes = dst.view(torch.uint8)
            near = (codes.to(torch.int16) - old).abs() == 1
            codes.masked_scatter_(near, old[near].to(torch.uint8))
        return dst

    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # (torch warns that a kernel is overridden: that is the point)
        warnings.simplefilter("ignore", UserWarning)
        lib.impl("copy_", copy_, "CPU")
    try:
        yield
    finally:
        lib._destroy()


def _requantize_line() -> str:
    lines, first = inspect.getsourcelines(workload_module.StaticFp8Linear.requantize)
    (number,) = [first + i for i, text in enumerate(lines) if ".copy_(" in text]
    return f"{source_file(WORKLOADS['static_custom_op'])}:{number}"


def _one_shot_program() -> None:
    x = torch.linspace(-3, 3, 64, dtype=torch.bfloat16).reshape(8, 8)
    x.to(torch.float8_e4m3fn)
    torch.empty(8, 8, dtype=torch.float8_e4m3fn).copy_(x * 1.01)


def workload_fault_caught() -> bool:
    """Whether tracing the static_custom_op workload under the fault fails its check, naming the
    re-quantizing copy_ and its line."""
    with _requantization_skips_one_step_changes():
        got = trace(WORKLOADS["static_custom_op"].run)
    return {(v.op, v.site) for v in got.violations} == {("aten.copy_.default", _requantize_line())}


def test_the_workload_catches_a_requantization_fault_naming_the_op_and_its_line(skip_if_refused):
    workload = WORKLOADS["static_custom_op"]
    skip_if_refused(workload.refusal("cpu"), "the static_custom_op workload")
    with _requantization_skips_one_step_changes():
        got = trace(workload.run)
    problem = check(workload, got)
    assert problem is not None and "aten.copy_.default [cast: violation]" in problem, problem
    assert {(v.op, v.site) for v in got.violations} == {("aten.copy_.default", _requantize_line())}, problem


def _profile(got: Trace) -> dict:
    """A profile holding only the workload's key and trace, as the workloads family writes them."""
    key = profile_keys.key_of(WORKLOADS["static_custom_op"])
    versions = {"torch": torch.__version__, "device": "cpu"}
    return {"versions": versions, "behaviour": {key: profile_keys.value(got)}, "traces": {key: got.pinned()}}


def test_the_upgrade_report_locates_the_fault_at_the_first_call_that_diverges(skip_if_refused):
    workload = WORKLOADS["static_custom_op"]
    skip_if_refused(workload.refusal("cpu"), "the static_custom_op workload")
    clean = trace(workload.run)
    with _requantization_skips_one_step_changes():
        faulty = trace(workload.run)
    report = build(_profile(clean), _profile(faulty))
    (change,) = report["changes"]
    assert change["key"] == "workload.static_custom_op" and change["severity"] == "numerics", change
    line = _requantize_line().rpartition("/")[2]
    first = next(r for r in faulty.records if r.op == "aten.copy_.default" and r.site.endswith(line))
    said = change["divergence"] or ""
    assert said.startswith(f"call #{first.index} (the {first.index + 1}"), said
    assert said.endswith(
        f"FP8 call) aten.copy_.default (cast) at fp8ref/harness/workloads/{line}: its output changed on inputs "
        "with the same bytes: this op computes something else now"
    ), said
    # every call before it computed the same bytes: the report names the first, not a later echo
    assert clean.pinned()[: first.index] == faulty.pinned()[: first.index]
    assert clean.pinned()[first.index] != faulty.pinned()[first.index]
    assert f"- `workload.static_custom_op`: call #{first.index} (the" in render_markdown(report)


def test_a_one_shot_cast_and_a_fresh_buffer_do_not_reach_it():
    with _requantization_skips_one_step_changes():
        got = trace(_one_shot_program)
    assert not got.violations and {r.op for r in got.records} >= {"aten._to_copy.default", "aten.copy_.default"}


@contextlib.contextmanager
def _float8_index_select_skips_repeats() -> Iterator[None]:
    """``index_select`` on the CPU computed through ``aten.index`` (on the uint8 view for float8,
    which index refuses on older torch), right for every dtype but float8, where a row whose index
    came earlier is left zero. ``aten.index`` is a kernel of its own: the stand-in does not call
    itself."""

    def index_select(self: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
        float8 = self.dtype in FLOAT8
        dim = dim % max(self.dim(), 1)
        src = self.view(torch.uint8) if float8 else self
        out = torch.ops.aten.index.Tensor(src, [None] * dim + [index.reshape(-1)])
        if float8 and index.numel():
            flat = index.reshape(-1).tolist()
            again = torch.tensor([i in flat[:n] for n, i in enumerate(flat)])
            out.movedim(dim, 0)[again] = 0
        return out.view(self.dtype) if float8 else out

    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # (torch warns that a kernel is overridden: that is the point)
        warnings.simplefilter("ignore", UserWarning)
        lib.impl("index_select", index_select, "CPU")
    try:
        yield
    finally:
        lib._destroy()


def _dispatch_line() -> str:
    lines, first = inspect.getsourcelines(moe_dispatch._dispatch)
    (number,) = [first + i for i, text in enumerate(lines) if ".index_select(" in text]
    return f"{source_file(WORKLOADS['moe_dispatch'])}:{number}"


def dispatch_fault_caught() -> bool:
    """Whether tracing the moe_dispatch workload under the fault fails its check, naming the FP8
    dispatch's index_select and its line, and nothing else."""
    with _float8_index_select_skips_repeats():
        got = trace(WORKLOADS["moe_dispatch"].run)
    return {(v.op, v.site) for v in got.violations} == {("aten.index_select.default", _dispatch_line())}


def test_the_moe_workload_catches_a_dispatch_fault_naming_the_op_and_its_line(skip_if_refused):
    workload = WORKLOADS["moe_dispatch"]
    skip_if_refused(workload.refusal("cpu"), "the moe_dispatch workload")
    with _float8_index_select_skips_repeats():
        got = trace(workload.run)
    problem = check(workload, got)
    assert problem is not None and "aten.index_select.default [movement: violation]" in problem, problem
    assert {(v.op, v.site) for v in got.violations} == {("aten.index_select.default", _dispatch_line())}, problem
    # the forward's dispatch of the tokens and the backward's of the gradient, each step
    assert len(got.violations) == 2 * moe_dispatch.STEPS, problem


def test_a_gather_of_distinct_rows_and_other_dtypes_do_not_reach_it():
    x = torch.linspace(-3, 3, 48, dtype=torch.bfloat16).reshape(8, 6)
    index = torch.tensor([5, 0, 7, 2])
    with _float8_index_select_skips_repeats():
        got = trace(lambda: x.to(torch.float8_e4m3fn).index_select(0, index))
        repeated = x.index_select(0, torch.tensor([1, 1]))
    assert not got.violations and "aten.index_select.default" in {r.op for r in got.records}
    assert torch.equal(repeated, x[[1, 1]])
