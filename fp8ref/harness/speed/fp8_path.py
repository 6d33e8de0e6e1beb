"""What a throughput test asserts instead of a speed: that the FP8 path it times ran FP8 GEMMs.

A speed ratio is only reported (the machines are shared and noisy), but a timed "FP8" path that
silently ran something else (a conversion dropped, a kernel fallen back to a bf16 GEMM of
upcast operands) would make the ratio meaningless while still looking plausible. Two facts tell:

- ``scaled_mm_calls``: how many scaled GEMM ops (``aten::_scaled_mm``, ``aten::_scaled_mm_v2``)
  one call of the path dispatched. torch.profiler's CPU events record every op the dispatcher
  runs, from eager code and from a compiled graph's wrapper alike (inductor calls a scaled GEMM
  it does not generate itself as an extern ATen kernel), so a compiled FP8 layer shows its GEMMs.
- ``shared_gemm_kernels``: on CUDA, the device kernels the FP8 call ran that the bf16 GEMM of the
  same shape runs too. A kernel that multiplies FP8 operands is not the bf16 GEMM's, so a shared
  one means the FP8 call reached the bf16 GEMM. A split-K reduction kernel (cuBLAS's
  ``splitKreduce_kernel``: it adds float32 partial sums, whatever the operands were) may serve
  both and is left out. On the CPU, torch's ``_scaled_mm`` dequantizes and calls the float32
  ``mm`` by design, so there is nothing to compare (an empty answer).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..gemm.gemm_probes import kernel_names, kineto_quiet

__all__ = ["SCALED_GEMM_OPS", "scaled_mm_calls", "shared_gemm_kernels"]

SCALED_GEMM_OPS = ("aten::_scaled_mm", "aten::_scaled_mm_v2")


def scaled_mm_calls(fn: Callable[[], object]) -> int:
    """How many scaled GEMM ops (``SCALED_GEMM_OPS``) ``fn()`` dispatched, one per call (an op
    reached from inside another scaled GEMM op is the same call)."""
    from torch.profiler import ProfilerActivity, profile

    with kineto_quiet(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    return sum(
        1
        for e in prof.events()
        if e.name in SCALED_GEMM_OPS and (e.cpu_parent is None or e.cpu_parent.name not in SCALED_GEMM_OPS)
    )


def shared_gemm_kernels(fp8: Callable[[], object], bf16: Callable[[], object], device: str) -> list[str]:
    """The CUDA kernels both ``fp8()`` and ``bf16()`` ran (``kernel_names``), reductions left out;
    empty on the CPU."""
    if torch.device(device).type != "cuda":
        return []
    theirs = {name for name in kernel_names(bf16, device) if "reduce" not in name.lower()}
    return [name for name in kernel_names(fp8, device) if name in theirs]
