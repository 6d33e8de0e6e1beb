"""The native float8 ops a device runs that the CPU does not, for the GPU twin of the native-op
checks (tests/gpu/test_native_ops.py). The kinds table (fp8ref/harness/native/native_op_kinds.py)
grows from what tests/cpu/install/test_native_ops.py finds the CPU running, and the CPU's checks by
kind reach only those ops: an op that runs on float8 only on CUDA was never named there and is
checked nowhere. So the GPU twin accounts for these ops apart from the rest: one without a kind or
a written reason fails as *unchecked on the device*, named; one with a kind is held to it on the
device, where alone it runs."""

from __future__ import annotations

from . import op_account as noc
from .native_checks import OpCheck

Matrix = dict[str, dict[str, str]]


def device_only(matrix: Matrix, cpu_matrix: Matrix) -> list[str]:
    """The ops that run (wholly or partly) on some float8 dtype in ``matrix`` and on none on the CPU."""
    return sorted(name for name in matrix if noc.runs_on(matrix, name) and not noc.runs_on(cpu_matrix, name))


def unaccounted(matrix: Matrix, cpu_matrix: Matrix, device: str, versions: str) -> list[str]:
    """One line per way an op the device runs is covered by nothing: ops the CPU runs too (the
    CPU suite fails on them as well), and ops only the device runs (unchecked on the device: the
    CPU never saw them). Empty when every running op has a kind or a written reason."""
    missing = noc.uncovered(matrix)
    only = set(device_only(matrix, cpu_matrix))
    shared = [name for name in missing if name not in only]
    here = [name for name in missing if name in only]
    lines = []
    if shared:
        lines.append(f"{versions} runs {shared} on float8 on {device} and on the CPU, which no check covers")
    if here:
        lines.append(
            f"unchecked on {device}: {versions} runs {here} on float8 on {device} only (the CPU runs none of "
            "them, so the CPU suite never named them); give each a kind or a written reason in "
            "fp8ref/harness/native/native_op_kinds.py"
        )
    return lines


def device_only_checks(matrix: Matrix, cpu_matrix: Matrix, device: str) -> list[OpCheck]:
    """``check_op`` on ``device`` of every device-only op that has a kind, on every float8 dtype it
    runs on there (the CPU's checks by kind never reach these ops)."""
    return noc.checked(device_only(matrix, cpu_matrix), matrix, device)
