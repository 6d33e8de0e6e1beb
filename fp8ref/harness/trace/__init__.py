"""A tracer that checks: ``trace(fn, *args, **kwargs)`` runs ``fn`` under a dispatch mode that
records every op reading or writing a float8 dtype, and every scaled GEMM, with the line of the
user's code that called it, and holds each to the definition by its kind on the spot (data
movement byte for byte against the input bytes the op's position tags name, codes read from
storage: ``fp8ref.harness.judge``; casts against the codec, arithmetic against the exact result
rounded once, ``_scaled_mm`` within its derived bound). ``python -m fp8ref trace
pkg.module:function`` runs it from the command line.

- ``records``: ``Trace`` (the ordered ``Record``s, the violations, ``summary``, ``digest``,
  ``pinned``);
- ``divergence``: where two pinned runs of one program first part (no torch);
- ``recorder``: the dispatch mode;
- ``op_checks``: the check of one recorded call, by its kind;
- ``dequantized``: the block-scaled and weight-only paths (an E8M0 scale's power of two, the GEMM
  of values decoded from float8 codes), which touch a float8 dtype only at their ends;
- ``call_site``: the user's ``file:line``.

- ``compiled``: a program's torch.compile regions run compiled and held to its eager trace at
  their boundary (under ``trace`` torch.compile runs them eagerly).

What it cannot see: inside code torch.compile generated (``compiled`` checks its outputs), and
ops run in C++ below a kernel (a fused kernel's own casts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .records import Difference, Record, TensorInfo, Trace

__all__ = ["trace", "Trace", "Record", "TensorInfo", "Difference"]


def trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """Run ``fn(*args, **kwargs)`` under the tracer; its return value is ``Trace.result``. What
    ``fn`` raises propagates (the records so far are lost with it). Where torch.compile'd code
    ran under it (eagerly: ``Trace.ran_eagerly``), dynamo's caches are reset afterwards, since
    dynamo marks a function it was refused to run eagerly from then on."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    from .recorder import TraceMode

    result = Trace()
    try:
        with TraceMode(result):
            result.result = fn(*args, **kwargs)
    finally:
        if result.ran_eagerly:  # (dynamo, refused by the mode, marked those functions to stay eager)
            import torch._dynamo

            torch._dynamo.reset()
    return result
