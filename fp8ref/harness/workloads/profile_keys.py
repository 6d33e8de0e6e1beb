"""The workloads family's profile keys (``workload.*``): each shipped workload traced on the
profile's device (on a GPU, its CUDA twin: ``tiny.on``), as one key per workload (its calls, its
violations and a digest of its trace: ``value``) and the trace's lines beside the keys
(``traces``), from which ``python -m fp8ref diff`` names the first call where two installs part
(``fp8ref.harness.trace.divergence``). A workload of torchao's is keyed
``workload.torchao.<name>`` (torchao's keys, not compared where torchao is not usable); the others
``workload.<name>``. A CUDA profile's values are that device kind's (its own golden): its GEMMs
accumulate otherwise than the CPU's. What each key means: ``meanings.py``."""

from __future__ import annotations

from functools import cache

from ..stack.probing import Where
from ..stack.refusals import observe
from ..trace import Trace
from .base import Workload
from .registry import WORKLOADS
from .traced import traced

__all__ = ["collect", "traces", "key_of", "value"]


def key_of(workload: Workload) -> str:
    return f"workload.torchao.{workload.name}" if workload.torchao else f"workload.{workload.name}"


def value(got: Trace, workload: Workload | None = None) -> str:
    """``76 calls, digest 0123456789abcdef`` (with ``, 2 violations`` when the trace broke the
    definition, and ``; <what differs>`` when the run's result is not what the workload's
    ``holds`` wants: the test of the workload fails then, and the profile says so too)."""
    bad = f", {len(got.violations)} violations" if got.violations else ""
    differs = workload.holds(got.result) if workload is not None and workload.holds is not None else None
    return f"{len(got.records)} calls{bad}, digest {got.fingerprint()}" + (f"; {differs}" if differs else "")


@cache
def _outcome(name: str, device: str) -> tuple[str, Trace | None]:
    """The workload's key value and its trace on ``device`` (None when refused or failed), once
    per process."""
    refusal = WORKLOADS[name].refusal(device)
    if refusal is not None:
        return refusal, None
    _, got = observe(lambda: traced(name, device), device)
    return (value(got, WORKLOADS[name]), got) if isinstance(got, Trace) else (str(got), None)


def _wanted(where: Where) -> list[Workload]:
    return [w for w in WORKLOADS.values() if where.torchao or not w.torchao]


def collect(where: Where) -> dict:
    return {key_of(w): _outcome(w.name, where.device)[0] for w in _wanted(where)}


def traces(where: Where) -> dict[str, list[str]]:
    """Each traced workload's ``Trace.pinned`` lines, by its key."""
    out = {}
    for w in _wanted(where):
        got = _outcome(w.name, where.device)[1]
        if got is not None:
            out[key_of(w)] = got.pinned()
    return out
