"""The FP8 lifecycle as workloads: tiny, deterministic programs of what FP8 training and
inference really run, on the CPU and as CUDA twins on a GPU (``tiny.on``), each traced by
``fp8ref.harness.trace.trace`` and required clean, so the suite checks what a team's training
runs, not only what a list names.

- ``base``: ``Workload`` (``refusal(device)``, ``run()``, the FP8 calls it makes) and ``check``, what a
  trace of one is held to;
- ``registry``: ``WORKLOADS``, by name;
- one module per program: ``float8_linear`` (torchao's Float8Linear under each recipe),
  ``grad_accumulation``, ``checkpointing``, ``static_custom_op`` (modded-nanogpt's custom op with
  cached float8 weights), ``delayed_scaling`` (a TransformerEngine-style autocast in plain torch),
  ``moe_dispatch`` (an FP8 mixture-of-experts layer: float8 codes dispatched by ``index_select``,
  masked by ``where``, split, a fused gate-up weight chunked, E4M3 -> E5M2 gradient codes),
  ``float8_inference`` (torchao's ``quantize_``), ``mx_training`` (torchao's MXFP8 training),
  ``exported`` (an FP8 model through ``torch.export``: saved, loaded and run), ``compiled``
  (FP8 linears as torch.compile regions, static and dynamic shapes), ``qat`` (torchao's float8
  QAT), ``accelerate_fp8`` (accelerate's torchao FP8 path on a small Llama);
- ``tiny``: the seeded models and batches.

A workload's own lines are the call sites its trace names: the tracer counts this folder as user
code, though it is fp8ref's (``trace.call_site``).

It is also the profile's workloads family (``profile_keys``, ``meanings``; ``traced``: each trace
once per process). Importing the package imports no torch (``python -m fp8ref diff`` reads
``meanings``): ``WORKLOADS`` is imported when first asked for.
"""

from __future__ import annotations

from typing import Any

from .base import Workload, check

__all__ = ["WORKLOADS", "Workload", "check"]


def __getattr__(name: str) -> Any:
    if name == "WORKLOADS":
        from .registry import WORKLOADS

        return WORKLOADS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
