"""What a shipped workload is (``Workload``) and the check a trace of one is held to (``check``)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..trace import Trace

__all__ = ["Workload", "check", "source_file"]


@dataclasses.dataclass(frozen=True)
class Workload:
    """One tiny, deterministic FP8 training or inference program.

    ``refusal(device)``: None when this install runs it on ``device``, else the install's words
    (asked with the smallest call, ``stack.refusals.attempt``); ``run()``: builds its model from a
    fixed seed and runs it, on the device of ``tiny.on`` (the CPU, or a CUDA twin's GPU).
    ``expects``: ``(op, kind) -> n``, the FP8 calls its program makes at least, so a trace that
    saw less did not check what the workload is for. ``module``: the module whose lines
    call its ops (the call sites a trace of it names). ``torchao``: whether its program is
    torchao's (its profile key is then torchao's too, ``workloads.profile_keys``). ``holds``: what
    ``run()``'s result must satisfy besides the trace (None when it does, else what differs), for a
    program that computes one thing two ways (an exported program and its eager model).
    ``compiled``: its program calls torch.compile'd code, which the tracer runs eagerly; run again
    with the regions compiled, it must give the eager run's results bit for bit
    (``trace.compiled.compare_compiled``, tests/cpu/install/test_workloads.py)."""

    name: str
    what: str
    module: str
    run: Callable[[], Any]
    refusal: Callable[[str], str | None]
    expects: dict[tuple[str, str], int]
    torchao: bool = True
    holds: Callable[[Any], str | None] | None = None
    compiled: bool = False


def source_file(workload: Workload) -> str:
    """The file of the workload's module, as the tracer names it (resolved)."""
    file = sys.modules[workload.module].__file__
    assert file is not None  # (a module imported from a file)
    return os.path.realpath(file)


def check(workload: Workload, got: Trace) -> str | None:
    """None when the trace of ``workload`` is clean: no violation, at least the FP8 calls it
    ``expects`` of each kind checked (not left unchecked), its result as ``holds`` wants it, and
    every call site a line of its own module; else what differs."""
    problems = []
    if got.violations:
        problems.append(f"{len(got.violations)} violation(s):\n" + "\n".join(v.report() for v in got.violations))
    # (a record keeps its kind when its check could not be made: only a checked one counts)
    seen = Counter((r.op, r.kind) for r in got.records if r.status != "unchecked")
    for (op, kind), least in workload.expects.items():
        if seen[op, kind] < least:
            problems.append(f"{op} checked as {kind}: {seen[op, kind]} call(s), the program makes at least {least}")
    if workload.holds is not None:
        differs = workload.holds(got.result)
        if differs:
            problems.append(differs)
    own = source_file(workload)
    elsewhere = sorted({r.site for r in got.records if os.path.realpath(r.site.rpartition(":")[0]) != own})
    if elsewhere:
        problems.append(f"call sites outside {own}: {', '.join(elsewhere[:3])}")
    return f"workload {workload.name}: " + "; ".join(problems) if problems else None
