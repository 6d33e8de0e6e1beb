"""One chunk of the 2^32 float32 sweep (2^20 consecutive patterns, ``sweep.sweep_float32``)
against torch's native cast of the same patterns alone, the sweep's floor (pytest-benchmark). Run
with ``pytest -m benchmark tests/bench``; nothing here asserts a speed. extra_info holds the
native time and the chunk's cost as a multiple of it, measured in the same run."""

import pytest
import torch

from fp8ref.harness.casts.implementations import torch_cast
from fp8ref.harness.casts.sweep import sweep_float32
from fp8ref.harness.speed.bench import best_time
from fp8ref.reference.formats import E4M3FN, E5M2

pytestmark = [pytest.mark.benchmark, pytest.mark.needs("pytest_benchmark")]

CHUNK = 1 << 20
# an all-in-range chunk (values around 1.0) and a mixed one (around E4M3's max: the full check)
STARTS = {"in-range": 0x3F800000, "mixed": 0x43E00000}


@pytest.mark.parametrize("where", list(STARTS))
@pytest.mark.parametrize("fmt", [E4M3FN, E5M2], ids=str)
def test_one_sweep_chunk_against_the_native_cast(benchmark, fmt, where):
    benchmark.group = f"sweep-chunk-{where}-{fmt.name}"
    impl = torch_cast(fmt)
    report = benchmark(sweep_float32, impl, fmt, STARTS[where], CHUNK, CHUNK)
    assert sum(report.counts.values()) == CHUNK and report.ok  # the benchmark ran the real thing
    if benchmark.stats is None:  # --benchmark-disable: one call, nothing timed
        return
    x = (torch.arange(CHUNK, dtype=torch.int32) + STARTS[where]).view(torch.float32)
    native = best_time(lambda: x.to(fmt.torch_dtype()), repeat=5)
    benchmark.extra_info.update({"native_s": native, "chunk_over_native": benchmark.stats.stats.min / native})
