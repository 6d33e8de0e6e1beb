"""Programs that call ``torch.compile``'d code, traced twice.

Under a dispatch mode that does not say otherwise, torch.compile runs the compiled function
eagerly (torch: "non-infra torch dispatch mode present"): ``trace`` then checks, op by op, what
the program computes eagerly, not the kernels torch.compile generated. ``trace_compiled`` runs
the program with its compiled regions compiled (the mode steps aside while torch.compile traces
and generates code, and is back while the code runs): it sees what still reaches torch's
dispatcher (the program's ops outside the regions, and the library calls generated code makes,
such as ``_scaled_mm``) and checks those; what a generated kernel computes itself (a fused cast)
it does not see. ``compare_compiled`` holds the two runs to each other bit for bit: the program's
results, and each torch.compile region the program makes, call by call, its outputs (float8 codes
among them) against the same region run eagerly (``regions``: where the program's result does not
carry a region's codes, they are compared still); the eager run's ops are each held to the
definition. What ran inside generated kernels is checked through those outputs only:
``Boundary.unseen`` names those calls, ``Boundary.regions`` the regions compared.

Bit for bit is the right demand where a region computes what eager computes before each cast (a
cast of its input and library GEMMs, as the shipped ``compiled.*`` workloads do). A region that
does high-precision arithmetic before a cast may legitimately differ: inductor keeps float32
intermediates where eager rounds each op to bfloat16, and the cast then rounds another value.
``differs`` says where; judge such a region with ``torch._inductor.config.emulate_precision_casts``
or by its own claims (``fp8ref.harness.claims``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..judge.stored import logical_bytes
from .records import Trace
from .regions import compare_regions, regions_recorded

__all__ = ["Boundary", "trace_compiled", "compare_compiled", "bitwise_differences"]


def trace_compiled(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """``fn(*args, **kwargs)`` under the tracer with torch.compile's regions running compiled
    (module docstring); what ``fn`` raises propagates."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    from .recorder import CompiledTraceMode

    result = Trace()
    with CompiledTraceMode(result):
        result.result = fn(*args, **kwargs)
    return result


def bitwise_differences(eager: Any, compiled: Any) -> list[str]:
    """Where two results (nested lists, tuples, dicts of tensors) differ: each tensor leaf by its
    bytes, shape and dtype; the others by ``==``."""
    a, spec_a = tree_flatten(eager)
    b, spec_b = tree_flatten(compiled)
    if spec_a != spec_b:
        return [f"the results' structures differ: {spec_a} and {spec_b}"]
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape:
                out.append(f"output {i}: {x.dtype}{tuple(x.shape)} eagerly, {y.dtype}{tuple(y.shape)} compiled")
                continue
            # (each one's bytes in logical order read from its storage: judge.stored, no kernel under check)
            xb, yb = logical_bytes(x.detach()), logical_bytes(y.detach())
            if xb != yb:
                n = sum(p != q for p, q in zip(xb, yb))
                out.append(f"output {i} ({x.dtype}{tuple(x.shape)}): {n} of {len(xb)} bytes differ compiled")
        elif x != y:
            out.append(f"output {i}: {x!r} eagerly, {y!r} compiled")
    return out


@dataclasses.dataclass
class Boundary:
    """``eager``: the trace of the program with torch.compile falling back to eager (every op
    checked); ``compiled``: the trace of it with its regions compiled; ``differs``: where their
    results, or a region's outputs at one of its calls, differ bit for bit; ``unseen``: the FP8
    calls (op packet, kind) the eager run made that the compiled run's dispatcher did not see,
    with how many: inside generated kernels, checked only at the regions' boundary;
    ``regions``: each region the program made (``trace.regions``) and how many of its calls were
    compared."""

    eager: Trace
    compiled: Trace
    differs: list[str]
    unseen: dict[tuple[str, str], int]
    regions: dict[str, int] = dataclasses.field(default_factory=dict)

    def problems(self) -> list[str]:
        """What is wrong: a violation in either run, or results that differ."""
        out = [f"eager: {v.report()}" for v in self.eager.violations]
        out += [f"compiled: {v.report()}" for v in self.compiled.violations]
        return out + [f"compiled regions against their eager trace: {d}" for d in self.differs]

    def __str__(self) -> str:
        return "\n".join(self.summary())

    def summary(self) -> list[str]:
        lines = [
            f"eager: {len(self.eager.records)} FP8 calls, {len(self.eager.violations)} violation(s); "
            f"compiled: {len(self.compiled.records)} seen, {len(self.compiled.violations)} violation(s); "
            f"results and regions {'bitwise equal' if not self.differs else 'differ'}"
        ]
        lines += [
            f"  region {name}: {n} call(s) compared with its eager run" for name, n in sorted(self.regions.items())
        ]
        if not self.regions:
            lines.append("  no torch.compile region made while the program ran: its result alone compared")
        lines += [
            f"  {op} ({kind}) x{n}: inside compiled code, checked at the regions' boundary only"
            for (op, kind), n in sorted(self.unseen.items())
        ]
        return lines


def _packet(op: str) -> str:
    """``aten._scaled_mm.out`` -> ``aten._scaled_mm``: generated code calls an op's ``out=``
    overload where the eager program calls another."""
    return op.rsplit(".", 1)[0]


def compare_compiled(fn: Callable[[], Any], eager: Trace | None = None) -> Boundary:
    """``fn`` traced with torch.compile falling back to eager (or ``eager``, that trace made
    before) and with its regions compiled, and the two held to each other. ``fn`` must compute
    the same thing each call (a seeded program that builds its own state). Dynamo's caches are
    reset between the two runs (``torch._dynamo.reset``): the process compiles afresh."""
    from . import trace

    eager = eager if eager is not None else trace(fn)
    with regions_recorded(compiled=False) as eager_regions:  # (untraced, each region run eagerly)
        fn()
    # (dynamo, refused by the tracer's mode, has marked the program's compiled functions to run
    # eagerly from then on: forgotten, so that this run compiles them)
    torch._dynamo.reset()
    with regions_recorded(compiled=True) as compiled_regions:
        compiled = trace_compiled(fn)
    seen = Counter((_packet(r.op), r.kind) for r in compiled.records)
    made = Counter((_packet(r.op), r.kind) for r in eager.records)
    unseen = {key: n - seen[key] for key, n in made.items() if n > seen[key]}
    regions, region_differs = compare_regions(eager_regions, compiled_regions, bitwise_differences)
    differs = bitwise_differences(eager.result, compiled.result) + region_differs
    return Boundary(eager, compiled, differs, unseen, regions)
