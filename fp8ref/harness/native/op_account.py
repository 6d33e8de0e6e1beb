"""The native float8 op checks the CPU and the GPU suites (and tests/meta) share: the ops FP8
training moves its numbers through, each held to its kind's check on every float8 dtype it runs
on (fp8ref/harness/native/native_checks.py), and the account of which ops ran, which were refused and
which are left unchecked with their reason."""

from __future__ import annotations

from ..stack import probes
from .native_checks import OpCheck, check_op
from .native_op_kinds import KINDS, UNCHECKED, kind_of
from .native_ops import Outcome

# What FP8 training moves its numbers through (FSDP's copy-in/copy-out, sharding, padding,
# concatenating per-expert weights, masks, loss-scale constants): checked in the default run on
# every dtype they run on. The rest of the catalogue's running ops run with --fp8-slow.
TRAINING_OPS = (
    "cat",
    "stack",
    "index_select",
    "index_put",
    "roll",
    "nn.functional.pad.constant",
    "constant_pad_nd",
    "repeat",
    "unfold",
    "split",
    "chunk",
    "narrow",
    "clone",
    "contiguous",
    "view",
    "transpose",
    "select_scatter",
    "slice_scatter",
    "masked_select",
    "where",
    "fill",
    "full",
    "zeros_like",
    "abs",
    "neg",
    "mul",
    "eq",
    "ne",
    "isnan",
    "isfinite",
    "float",
    "bfloat16",
    "flip",
    "gather",
    "scatter",
    "masked_fill",
)


def runs_on(matrix: dict[str, dict[str, str]], name: str) -> list[str]:
    """The float8 formats ``name`` runs on (wholly or partly) in ``matrix``."""
    return [fmt for fmt, word in matrix.get(name, {}).items() if word in ("runs", "partial")]


def uncovered(matrix: dict[str, dict[str, str]]) -> list[str]:
    """The ops that run on some float8 dtype and that no kind or reason covers."""
    return sorted(name for name in matrix if runs_on(matrix, name) and kind_of(name) is None)


def checked(names: list[str] | tuple[str, ...], matrix: dict[str, dict[str, str]], device: str) -> list[OpCheck]:
    """``check_op`` of every op of ``names`` that has a kind, on every format it runs on."""
    formats = {f.name: f for f in probes.float8_formats()}
    return [
        check_op(name, formats[fmt], device)
        for name in names
        if kind_of(name) in KINDS
        for fmt in runs_on(matrix, name)
    ]


def problems(checks: list[OpCheck]) -> list[str]:
    return [p for c in checks for p in c.problems]


def account(matrix: dict[str, dict[str, str]], judged: dict[str, dict[str, Outcome]] | None = None) -> list[str]:
    """The coverage account for the end of the run: per kind, the ops × dtypes that ran, those
    refused, and the ops checked elsewhere or out of scope, with their reasons; with ``judged``
    (``native_ops.judgements``), each partial op's samples that ran and those refused."""
    cells = [(name, word) for name, row in matrix.items() for word in row.values()]
    ran = [n for n, w in cells if w in ("runs", "partial")]
    lines = [
        f"torch's op catalogue: {len(matrix)} ops x {len({f for r in matrix.values() for f in r})} float8 dtypes: "
        f"{len(ran)} run ({sum(w == 'partial' for _, w in cells)} partly), "
        f"{sum(w == 'refused' for _, w in cells)} refused, {sum(w == 'n/a' for _, w in cells)} n/a"
    ]
    for kind in KINDS:
        ops = sorted({n for n in ran if kind_of(n) == kind})
        lines.append(f"  {kind}: {len(ops)} ops, {sum(kind_of(n) == kind for n in ran)} op x dtype checked")
    left = sorted({n for n in ran if kind_of(n) == "unchecked"})
    lines.append(f"  checked elsewhere or out of scope, with the reason: {len(left)} ops")
    by_reason: dict[str, list[str]] = {}
    for n in left:
        by_reason.setdefault(UNCHECKED[n], []).append(n)
    lines += [f"    {', '.join(ops)}: {reason}" for reason, ops in by_reason.items()]
    missing = uncovered(matrix)
    lines.append(f"  run but covered by nothing: {len(missing)}" + (f" ({', '.join(missing)})" if missing else ""))
    partial = {n: [f for f, w in row.items() if w == "partial"] for n, row in matrix.items()}
    if judged is not None and any(partial.values()):
        lines.append("  partial, by op (on the first dtype named; samples by their catalogue index):")
        lines += [
            f"    {n} ({' '.join(fmts)}): {judged[n][fmts[0]].named()}" for n, fmts in sorted(partial.items()) if fmts
        ]
    return lines
