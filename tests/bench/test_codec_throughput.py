"""Codec encode throughput against torch's native cast (pytest-benchmark). Run with
``pytest -m benchmark tests/bench``; nothing here asserts a speed. The ratio to the native cast,
measured in the same run, goes into the benchmark's extra_info (target: >= 0.25x on 2 CPU cores)."""

import pytest
import torch

from fp8ref.harness.speed.bench import best_time
from fp8ref.reference.codec import encode
from fp8ref.reference.formats import select

pytestmark = [pytest.mark.benchmark, pytest.mark.needs("pytest_benchmark")]

N = 1 << 24


@pytest.fixture(scope="module")
def x():
    return torch.randn(N, generator=torch.Generator().manual_seed(0)) * 64


@pytest.mark.parametrize("fmt", select(bits=8, signed=True), ids=[f.name for f in select(bits=8, signed=True)])
def test_codec_encode_16m_float32(benchmark, x, fmt):
    benchmark.group = f"encode-16M-float32-{fmt.name}"
    codes = benchmark(encode, x, fmt, saturate=True)
    assert codes.shape == x.shape  # the benchmark ran the real thing
    assert torch.equal(codes[:4096], encode(x[:4096], fmt, saturate=True))
    if benchmark.stats is None:  # --benchmark-disable: the call ran once, nothing was timed
        return
    native = best_time(lambda: x.to(fmt.torch_dtype()), repeat=5)
    benchmark.extra_info.update({"native_s": native, "ratio_vs_native": native / benchmark.stats.stats.min})
