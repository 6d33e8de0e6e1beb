"""The accumulator an FP8 GEMM's bound assumes on a GPU: the documented hardware behaviour, never a
probe of the device under test.

A bound taken from ``gemm_probes.accumulator_bits`` of the device it judges loosens with that
device: a GEMM whose accumulator narrowed to 8 bits would read as 8 bits and be held to an 8-bit
bound. The probes stay observations (the behaviour profile pins ``scaled_mm.accum_bits.*`` and
``scaled_mm.promotion_interval.*``, and ``scaled_mm_regressions.check_promotion`` asserts the one
promise cuBLAS makes); the bounds below come from what is documented:

- Within one tensor-core instruction's K block, Hopper's FP8 accumulator keeps about 14 bits of the
  aligned products: "the accumulation precision of FP8 GEMM on NVIDIA H800 GPUs is limited to
  retaining around 14 bits" (DeepSeek-V3 Technical Report, arXiv:2412.19437, section 3.3.2,
  "Increasing Accumulation Precision"; DeepGEMM's maintainers, deepseek-ai/DeepGEMM issue 50: "it
  only uses the highest 14 bits of each mantissa product after sign-fill right shifting"), and a
  float format of 22 bits, 13 of them mantissa (e8m13), on Hopper and Ada (SageAttention2,
  arXiv:2411.10958; deepseek-ai/DeepGEMM issue 37). The least of the documented widths is 13
  mantissa bits (``WITHIN_BITS``), what ``accumulator_bits`` counts (2^16 + 2^-(d - 16) exact).
  No narrower FP8 tensor-core accumulator is documented for any generation, so 13 holds every GPU
  to it; a wider one (Blackwell's) is held to Hopper's bound, not loosened by its own.
- ``use_fast_accum=True``: cuBLAS documents ``CUBLASLT_MATMUL_DESC_FAST_ACCUM`` as "intermediate
  results will not periodically be promoted to a higher precision" (cuBLAS docs,
  cublasLtMatmulDescAttributes_t; quoted in NVIDIA/cutlass issue 1329): the whole K summed at the
  narrow width (``interval`` None).
- ``use_fast_accum=False``: the partial sums are periodically promoted (what the same entry says
  fast accumulation gives up), at an interval cuBLAS does not state (DeepSeek-V3's kernels: every
  128 products; CUTLASS's ``GmmaFP8Accumulation``, example 54: every ``mma_promotion_interval`` =
  4 instructions).
  ``check_promotion`` holds every device to promoting within ``gemm_probes.PROMOTION_K`` (1024)
  products, so that is the interval a bound assumes (``EXACT_INTERVAL``): a device that promotes
  less often fails that check, and a bound for it is no looser than for one that passes.

On the CPU ``torch._scaled_mm`` scales the operands to float32 and multiplies in float32 (torch's
CPU kernel): float32's 23 bits at every product.
"""

from __future__ import annotations

import torch

from ...reference.validate import boolean
from .gemm_probes import PROMOTION_K, accumulation_bound

__all__ = [
    "WITHIN_BITS",
    "FAST_INTERVAL",
    "EXACT_INTERVAL",
    "FLOAT32_BITS",
    "gpu_accumulator",
    "accumulator",
    "within_bits",
    "gemm_accumulation",
]

WITHIN_BITS = 13  # the least documented FP8 tensor-core accumulator width within a K block (docstring)
FAST_INTERVAL: int | None = None  # fast accumulation: never promoted (cuBLAS docs)
EXACT_INTERVAL: int | None = PROMOTION_K  # promoted at least this often (check_promotion asserts it)
FLOAT32_BITS = 23  # the CPU's float32 GEMM


def _on_cpu(device: str) -> bool:
    return torch.device(device).type == "cpu"


def gpu_accumulator(fast_accum: bool | None = None) -> tuple[int, int | None]:
    """(mantissa bits within a K block, promotion interval in products or None for none) that a
    GPU's FP8 GEMM is documented to keep with ``use_fast_accum`` = ``fast_accum``; None: the worse
    of the two (fast accumulation's)."""
    if fast_accum is not None:
        boolean(fast_accum, "fast_accum")
    return WITHIN_BITS, EXACT_INTERVAL if fast_accum is False else FAST_INTERVAL


def accumulator(device: str, fast_accum: bool | None = None) -> tuple[int, int | None]:
    """``gpu_accumulator(fast_accum)`` on a GPU; on the CPU float32 at every product (23, 1)."""
    return (FLOAT32_BITS, 1) if _on_cpu(device) else gpu_accumulator(fast_accum)


def within_bits(device: str) -> int:
    """The accumulator's mantissa bits a ``reference_bound`` over the whole K assumes on ``device``:
    float32's on the CPU, the documented least within a K block on a GPU (no promotion assumed)."""
    return FLOAT32_BITS if _on_cpu(device) else WITHIN_BITS


def gemm_accumulation(k: int, device: str) -> float:
    """The relative accumulation bound of a GEMM over ``k`` products on ``device``: float32's
    (k + 1) 2^-24 on the CPU; on a GPU at least ``accumulation_bound`` of the documented
    accumulator, fast accumulation's (the worse: ``gpu_accumulator(None)``)."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k: expected a positive int, got {k!r}")
    acc = (k + 1) * 2.0**-24
    return acc if _on_cpu(device) else max(acc, accumulation_bound(k, *gpu_accumulator(None)))
