"""Throughput helpers. Speed is measured here and reported as ratios taken in one run, never
asserted in tests (the machines are shared and noisy)."""

from __future__ import annotations

import time
from typing import Callable

import torch

from .codec import encode
from .formats import FP8_FORMATS, get_format

__all__ = ["best_time", "codec_throughput"]


def best_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Best wall time of ``repeat`` calls, in seconds (CUDA is synchronized around each call)."""
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat: expected a positive int, got {repeat!r}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def codec_throughput(n: int = 1 << 24, formats=FP8_FORMATS, repeat: int = 5, device: str = "cpu",
                     seed: int = 0) -> list[dict]:
    """Encode ``n`` float32 values with the codec and with torch's native cast, per format.

    Returns one row per format: seconds for each, elements/s, and ``ratio`` = codec throughput /
    native throughput (1.0 = as fast as the native cast). Both are timed in the same run,
    alternating, so machine noise hits both alike.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive int, got {n!r}")
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, generator=gen) * 64).to(device)
    rows = []
    for fmt in map(get_format, formats):
        dtype = fmt.torch_dtype()
        if dtype is None:
            continue
        t_native, t_codec = float("inf"), float("inf")
        for _ in range(repeat):  # alternate so drifts in machine load hit both
            t_native = min(t_native, best_time(lambda: x.to(dtype), repeat=1))
            t_codec = min(t_codec, best_time(lambda: encode(x, fmt, saturate=True), repeat=1))
        rows.append({
            "format": fmt.name, "n": n, "device": str(device),
            "native_s": t_native, "codec_s": t_codec,
            "native_melem_s": n / t_native / 1e6, "codec_melem_s": n / t_codec / 1e6,
            "ratio": t_native / t_codec,
        })
    return rows
