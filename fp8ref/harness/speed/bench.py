"""Throughput helpers. Speed is measured here and reported as ratios taken in one run, never
asserted in tests (the machines are shared and noisy)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable

import torch

from ...reference.codec import encode
from ...reference.formats import FloatFormat, get_format, select
from ...reference.validate import instance, positive_int

__all__ = [
    "best_time",
    "device_time",
    "synchronized_clock",
    "codec_throughput",
    "PEAK_TFLOPS",
    "peak_tflops",
    "LLM_GEMM_SHAPES",
    "gemm_tflops",
    "scaled_mm_vs_bf16",
]

# Dense (no sparsity) tensor-core peaks in TFLOP/s, from NVIDIA's datasheets, keyed by the exact
# name torch.cuda.get_device_name() gives (without a leading "NVIDIA "): H100 SXM and H200 SXM
# 989 BF16, 1,979 FP8; H100 PCIe 756 / 1,513; B200 2,250 / 4,500. Other models (H100 NVL, H200
# NVL, GB200, ...) have other clocks and power limits: they get no peak rather than a wrong one.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 80GB HBM3": {"bf16": 989.0, "fp8": 1979.0},
    "H100 PCIe": {"bf16": 756.0, "fp8": 1513.0},
    "H200": {"bf16": 989.0, "fp8": 1979.0},
    "B200": {"bf16": 2250.0, "fp8": 4500.0},
}

# (name, M, K, N) for y = x @ w.T with x (M, K) and w (N, K): projections of Qwen3-4B (hidden
# 2560, intermediate 9728) and Llama-3-8B (hidden 4096, intermediate 14336), and a square 8192^3.
LLM_GEMM_SHAPES = [
    ("qwen3-4b.qkv", 8192, 2560, 6144),
    ("qwen3-4b.mlp_up", 8192, 2560, 9728),
    ("qwen3-4b.mlp_down", 8192, 9728, 2560),
    ("llama3-8b.qkv", 16384, 4096, 6144),
    ("llama3-8b.mlp_up", 4096, 4096, 14336),
    ("llama3-8b.mlp_down", 4096, 14336, 4096),
    ("square-8192", 8192, 8192, 8192),
]


def best_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Best wall time of ``repeat`` calls, in seconds (CUDA is synchronized around each call)."""
    positive_int(repeat, "repeat")
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


def device_time(fn: Callable[[], object], iters: int = 20, repeat: int = 5, warmup: int = 3) -> float:
    """Seconds per call of ``fn``: the best of ``repeat`` runs of ``iters`` back-to-back calls.

    On CUDA the runs are timed with CUDA events around the launches (a kernel's time, not its
    enqueue; Python dispatch is amortised over ``iters``); elsewhere with ``perf_counter``.
    ``warmup`` calls first (compilation, autotuning, cuBLASLt heuristics) are not timed."""
    positive_int(iters, "iters")
    positive_int(repeat, "repeat")
    for _ in range(warmup):
        fn()
    if not torch.cuda.is_available():
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            best = min(best, (time.perf_counter() - t0) / iters)
        return best
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / iters)
    return best


def synchronized_clock() -> float:
    """``time.perf_counter()`` once the CUDA queue has drained. As pytest-benchmark's timer, each
    timed round then covers the device work its calls launched, back to back (its own timer reads
    the clock while kernels are still queued: it times their launches)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


def codec_throughput(
    n: int = 1 << 24,
    formats: Iterable[str | FloatFormat] | None = None,
    repeat: int = 5,
    device: str = "cpu",
    seed: int = 0,
) -> list[dict]:
    """Encode ``n`` float32 values with the codec and with torch's native cast, per format.

    ``formats`` defaults to the FP8 element formats.
    Returns one row per format: seconds for each, elements/s, and ``ratio`` = codec throughput /
    native throughput (1.0 = as fast as the native cast). Both are timed in the same run,
    alternating, so machine noise hits both alike.
    """
    positive_int(n, "n")
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, generator=gen) * 64).to(device)
    rows = []
    for fmt in map(get_format, select(bits=8, signed=True) if formats is None else formats):
        dtype = fmt.torch_dtype()
        if dtype is None:
            continue
        t_native, t_codec = float("inf"), float("inf")
        for _ in range(repeat):  # alternate so drifts in machine load hit both
            t_native = min(t_native, best_time(functools.partial(x.to, dtype), repeat=1))
            t_codec = min(t_codec, best_time(functools.partial(encode, x, fmt, saturate=True), repeat=1))
        rows.append(
            {
                "format": fmt.name,
                "n": n,
                "device": str(device),
                "native_s": t_native,
                "codec_s": t_codec,
                "native_melem_s": n / t_native / 1e6,
                "codec_melem_s": n / t_codec / 1e6,
                "ratio": t_native / t_codec,
            }
        )
    return rows


def peak_tflops(device_name: str) -> dict[str, float] | None:
    """The peak table row for exactly this device model, or None when no peak is known for it."""
    instance(device_name, str, "device_name", "a str")
    return PEAK_TFLOPS.get(device_name.strip().removeprefix("NVIDIA ").strip())


def gemm_tflops(m: int, k: int, n: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"seconds: expected a positive time, got {seconds!r}")
    return 2.0 * m * k * n / seconds / 1e12


def scaled_mm_vs_bf16(m: int, k: int, n: int, device: str = "cuda", repeat: int = 10, fast_accum: bool = True) -> dict:
    """Time bf16 ``mm`` and tensorwise-scaled E4M3 ``torch._scaled_mm`` on the same shape, in one
    run (alternating), and return TFLOP/s of each, the ratio, and percent of peak if known."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, generator=gen).to(device=device, dtype=torch.bfloat16)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()  # row-major x column-major
    one = torch.tensor(1.0, device=device)

    def bf16():
        return a @ b.t()

    def fp8():
        return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)

    t_bf16 = t_fp8 = float("inf")
    for _ in range(repeat):  # alternate, so drifts in clocks and load hit both
        t_bf16 = min(t_bf16, device_time(bf16, iters=10, repeat=1, warmup=1))
        t_fp8 = min(t_fp8, device_time(fp8, iters=10, repeat=1, warmup=1))
    row: dict[str, object] = {
        "m": m,
        "k": k,
        "n": n,
        "device": device,
        "bf16_tflops": gemm_tflops(m, k, n, t_bf16),
        "fp8_tflops": gemm_tflops(m, k, n, t_fp8),
        "fp8_over_bf16": t_bf16 / t_fp8,
    }
    name = torch.cuda.get_device_name() if torch.device(device).type == "cuda" else "cpu"
    peak = peak_tflops(name)
    row["device_name"] = name
    if peak:
        row["bf16_pct_peak"] = 100 * gemm_tflops(m, k, n, t_bf16) / peak["bf16"]
        row["fp8_pct_peak"] = 100 * gemm_tflops(m, k, n, t_fp8) / peak["fp8"]
    else:
        row["peak"] = f"no peak known for {name}"
    return row
