"""Each shipped workload traced once per process: the profile's workloads family and the tests
that hold each trace to its workload's check (tests/cpu/install/test_workloads.py) read the same
trace, so the run pays for it once. A fault injected into the install must trace afresh
(``fp8ref.harness.trace.trace``), never through this cache. Each is traced with this folder alone
as the user's code (``call_site.only_user_code``): a library that wraps a module's forward,
wherever it is installed, never moves a call site out of the workloads' folder."""

from __future__ import annotations

import os
from functools import cache

from ...reference.validate import one_of
from ..trace import Trace, trace
from ..trace.call_site import only_user_code
from . import tiny
from .registry import WORKLOADS

__all__ = ["traced"]


def traced(name: str, device: str = "cpu") -> Trace:
    """The trace of the workload ``name`` on this install and ``device`` (its ``run()`` under the
    tracer, inside ``tiny.on(device)``: a CUDA twin on a GPU); for a workload the install does not
    refuse there. What the run raises propagates and is not kept."""
    one_of(name, WORKLOADS, "name")
    return _traced(name, device)


@cache  # (by name and device, however the caller spelled them)
def _traced(name: str, device: str) -> Trace:
    with tiny.on(device), only_user_code(os.path.dirname(__file__)):
        return trace(WORKLOADS[name].run)
