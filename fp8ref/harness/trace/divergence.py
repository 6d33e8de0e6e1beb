"""Where two runs of one program first diverge: given the ``Trace.pinned`` lines of each (kept in
the behaviour profile by the workloads family), the first traced call whose output bytes changed
while its inputs' did not. That call's op computed something else on the same inputs: the change
is there, not in anything after it. No torch: ``python -m fp8ref diff`` reads it."""

from __future__ import annotations

import dataclasses

__all__ = ["Call", "parse", "first_divergence"]


@dataclasses.dataclass(frozen=True)
class Call:
    """One pinned call read back: op, the check it was held to, its tensors (``TensorInfo.token``
    words), the file:line that made it."""

    op: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    site: str

    @staticmethod
    def _layouts(tokens: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(t.partition("#")[0] for t in tokens)

    def same_call(self, other: Call) -> bool:
        """The same op on tensors of the same dtypes, shapes and strides (the bytes aside)."""
        return (self.op, self._layouts(self.inputs), self._layouts(self.outputs)) == (
            other.op,
            other._layouts(other.inputs),
            other._layouts(other.outputs),
        )

    def words(self) -> str:
        return f"{self.op} ({self.kind}) at {self.site}"


def parse(line: str) -> Call:
    """A ``Record.pinned`` line back as a ``Call``; ValueError naming the line when it is not one."""
    parts = line.split(" | ") if isinstance(line, str) else []
    head = parts[0].split(" ") if parts else []
    if len(parts) != 4 or len(head) != 2:
        raise ValueError(f"not a pinned trace line (expected 'op kind | inputs | outputs | site'): {line!r}")

    def tensors(text: str) -> tuple[str, ...]:
        return () if text == "-" else tuple(text.split(" "))

    return Call(head[0], head[1], tensors(parts[1]), tensors(parts[2]), parts[3])


def _which(a: tuple[str, ...], b: tuple[str, ...]) -> str:
    """``its output``, or ``outputs 0, 2`` of a call with several."""
    if len(a) == 1:
        return "its output"
    return "outputs " + ", ".join(str(i) for i, (x, y) in enumerate(zip(a, b)) if x != y)


def _nth(i: int) -> str:
    """``call #8 (the 9th FP8 call)``: the trace's index counts from 0."""
    n = i + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"call #{i} (the {n}{suffix} FP8 call)"


def first_divergence(a: list[str], b: list[str]) -> str | None:
    """Where the run pinned as ``a`` and the run ``b`` first part, in words; None when every call
    made the same op on the same tensors with the same bytes out (call sites aside).

    - the first call whose outputs differ on inputs with the same bytes: the change is that op's;
    - a call whose inputs already differ: an op the trace does not record (it touches no float8
      tensor) changed them before any recorded output changed;
    - a call that is not the same op on the same dtypes, shapes and strides: the program itself
      took another path there."""
    calls_a, calls_b = [parse(x) for x in a], [parse(y) for y in b]
    for i, (x, y) in enumerate(zip(calls_a, calls_b)):
        if not x.same_call(y):
            return f"{_nth(i)}: the program took another path: pinned {x.words()}, now {y.words()}"
        if x.outputs == y.outputs:
            continue
        if x.inputs == y.inputs:
            return (
                f"{_nth(i)} {y.words()}: {_which(x.outputs, y.outputs)} changed on inputs with the same bytes: "
                "this op computes something else now"
            )
        return (
            f"{_nth(i)} {y.words()}: its output changed, but so did its inputs, before any recorded output did: "
            "an op the trace does not record (no float8 tensor in or out) computes something else now"
        )
    if len(calls_a) != len(calls_b):
        agree = min(len(calls_a), len(calls_b))
        return f"the first {agree} calls agree; pinned {len(calls_a)} calls, now {len(calls_b)}"
    return None
