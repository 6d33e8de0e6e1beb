"""What a trace holds: one ``Record`` per call of an op that reads or writes a float8 dtype, in the
order the calls ran, with the check it was held to and its verdict; ``Trace`` holds them, the
violations, a summary per op, a digest to pin and the lines a profile keeps (``pinned``) to find
where two runs first diverge (``divergence``). No torch here."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from typing import Any

__all__ = ["TensorInfo", "Difference", "Record", "Trace", "STATUSES", "package_path"]

STATUSES = ("ok", "violation", "unchecked")


def package_path(site: str) -> str:
    """``file:line`` with the file as its path from its top package's folder
    (``fp8ref/harness/workloads/float8_linear.py:31``; a module outside a package, its name), so
    the same code gives the same words on every machine."""
    path, colon, line = site.rpartition(":")
    if not colon or not path:
        return site
    folder, parts = os.path.dirname(path), [os.path.basename(path)]
    while folder and os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return "/".join(parts) + f":{line}"


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One tensor argument or output: dtype (``float8_e4m3fn``), shape, strides, device, and the
    SHA-256 of its bytes in logical order (16 hex digits; empty for an output whose bytes are
    whatever memory held, ``torch.empty``'s)."""

    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    device: str
    sha256: str = ""

    def __str__(self) -> str:
        shape = ", ".join(map(str, self.shape))
        text = f"{self.dtype}[{shape}] stride {self.stride}"
        return text + ("" if self.device == "cpu" else f" on {self.device}")

    @property
    def float8(self) -> bool:
        return self.dtype.startswith("float8_")

    def token(self) -> str:
        """The tensor in one space-free word: ``float8_e4m3fn[16,32](32,1)#<sha256>``."""
        shape, stride = ",".join(map(str, self.shape)), ",".join(map(str, self.stride))
        return f"{self.dtype}[{shape}]({stride})#{self.sha256}"


@dataclasses.dataclass(frozen=True)
class Difference:
    """The first element of an output that the check rejects: which output, its index, the
    answer given and the one the definition gives (code in hex and value, or a value and its
    bound), and how many elements of that output differ."""

    output: int
    index: tuple[int, ...]
    got: str
    want: str
    count: int
    total: int

    def __str__(self) -> str:
        which = f"output {self.output} " if self.output else ""
        return (
            f"{which}{self.count} of {self.total} elements differ; first at {list(self.index)}: "
            f"got {self.got}, want {self.want}"
        )


@dataclasses.dataclass
class Record:
    """One traced call. ``kind``: the check it was held to (``movement``, ``cast``, ``values``,
    ``written``, ``converts``, ``scaled_mm``; ``e8m0_scale``, ``dequantized_gemm``: ``dequantized``) or
    ``unchecked``; ``status``: ``ok``, ``violation``
    (``problem`` and ``difference`` say what differs) or ``unchecked`` (``reason`` says why)."""

    index: int
    op: str
    site: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    kind: str = "unchecked"
    status: str = "unchecked"
    reason: str = ""
    problem: str = ""
    difference: Difference | None = None
    observed: dict[str, str] = dataclasses.field(default_factory=dict)  # implementation-defined answers
    known_deviations: dict[str, int] = dataclasses.field(default_factory=dict)  # named deviation -> elements

    def line(self) -> str:
        """The call in one line: index, op, kind and verdict, call site, inputs -> outputs."""
        ins = ", ".join(map(str, self.inputs)) or "-"
        outs = ", ".join(map(str, self.outputs)) or "-"
        verdict = f"{self.kind}: {self.status}" if self.status != "unchecked" else f"unchecked: {self.reason}"
        return f"#{self.index} {self.op} [{verdict}] at {self.site}: {ins} -> {outs}"

    def pinned(self) -> str:
        """The call as a profile keeps it: ``op kind | inputs | outputs | file:line``, each tensor a
        ``TensorInfo.token`` with the SHA-256 of its bytes, the call site by its file's path inside
        its package (``package_path``: the folder above differs between machines).
        ``divergence.first_divergence`` reads it back."""
        ins = " ".join(t.token() for t in self.inputs) or "-"
        outs = " ".join(t.token() for t in self.outputs) or "-"
        return f"{self.op} {self.kind} | {ins} | {outs} | {package_path(self.site)}"

    def report(self) -> str:
        """A violation as a person needs it: the op, where the user's code called it, the
        tensors, what differs and the first differing element."""
        text = [self.line(), f"  {self.problem}"]
        if self.difference is not None:
            text.append(f"  {self.difference}")
        return "\n".join(text)


@dataclasses.dataclass
class Trace:
    """The ordered records of one traced call, ``result`` its return value, and ``through``: the
    calls a tensor subclass (torchao's float8 and MX tensors) handled, each ``(op, subclasses,
    call site)``: the ops it ran on its inner tensors are among the records. ``staged``: the ops
    run on torch's tracing tensors (``torch.export`` building a program: no values to check).
    ``ran_eagerly``: the records made inside torch.compile'd functions, which run eagerly under
    the tracer (``trace.compiled`` checks their compiled kernels at the regions' boundary)."""

    records: list[Record] = dataclasses.field(default_factory=list)
    through: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    result: Any = None
    staged: int = 0
    ran_eagerly: int = 0

    @property
    def violations(self) -> list[Record]:
        return [r for r in self.records if r.status == "violation"]

    @property
    def unchecked(self) -> list[Record]:
        return [r for r in self.records if r.status == "unchecked"]

    def summary(self) -> list[str]:
        """One line per op: its calls, the kinds it was checked as, how many were checked, the
        violations, and why the rest were not checked."""
        ops: dict[str, list[Record]] = {}
        for r in self.records:
            ops.setdefault(r.op, []).append(r)
        width = max((len(op) for op in ops), default=0)
        lines = []
        for op, recs in ops.items():
            kinds = Counter(r.kind for r in recs)
            checked = sum(r.status != "unchecked" for r in recs)
            bad = sum(r.status == "violation" for r in recs)
            why = sorted({r.reason for r in recs if r.status == "unchecked"})
            seen = sorted({v for r in recs for v in r.observed.values()})
            text = f"{op:<{width}}  {len(recs):>4} call(s)  " + ", ".join(f"{k} x{n}" for k, n in kinds.items())
            text += f"; checked {checked}, unchecked {len(recs) - checked}"
            text += f"; {bad} violation(s)" if bad else ""
            text += f"; observed {', '.join(seen)}" if seen else ""
            text += f" (unchecked: {'; '.join(why)})" if why else ""
            lines.append(text)
        for (op, types), n in Counter((op, types) for op, types, _ in self.through).items():
            lines.append(f"{op:<{width}}  {n:>4} call(s) on {types}: seen through (its inner ops are above)")
        if self.staged:
            lines.append(f"{self.staged} op(s) on fake or functional tensors (a program traced, not run): not checked")
        if self.ran_eagerly:
            lines.append(
                f"{self.ran_eagerly} of these call(s) ran inside torch.compile'd code, which runs eagerly under the "
                "tracer: checked here op by op; its compiled kernels are held to them by "
                "fp8ref.harness.trace.compiled.compare_compiled"
            )
        return lines

    def digest(self) -> list[str]:
        """The ordered ops with each tensor's dtype, shape and strides and the SHA-256 prefix of
        each output's bytes, whatever its dtype (a GEMM's bfloat16 output as a cast's codes): two
        runs that compute the same outputs the same way give the same lines (call sites are left
        out, so moving code does not change it)."""
        out = []
        for r in self.records:
            ins = ", ".join(map(str, r.inputs)) or "-"
            outs = ", ".join(f"{t} #{t.sha256}" if t.sha256 else str(t) for t in r.outputs) or "-"
            out.append(f"{r.op}: {ins} -> {outs}")
        return out

    def fingerprint(self) -> str:
        """``digest()`` in one word: the first 16 hex digits of its lines' SHA-256."""
        return hashlib.sha256("\n".join(self.digest()).encode()).hexdigest()[:16]

    def pinned(self) -> list[str]:
        """Every record's ``Record.pinned`` line, in order."""
        return [r.pinned() for r in self.records]
