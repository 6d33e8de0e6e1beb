"""Compiled FP8 casts whose outputs are stored transposed (``.t().contiguous()``, a column-major
buffer, torchao's tensorwise cast transposed for the backward's GEMM), held bit for bit and
stride for stride to eager, and eager to fp8ref's codec, under ``torch.compile``'s default mode,
``mode="max-autotune"`` as a user runs it, and, on CUDA, each launch configuration inductor's
autotuner tries for each kernel, forced one at a time, not only the one that wins
(``fp8ref/harness/casts/transposed_stores.py``, ``compiled_variants.py``; ``torchao_t`` needs
torchao). The class this guards:
in mid-2026 a Triton miscompile of transposed 1-byte stores wrote garbage FP8 bytes under some
launch configurations, so in the compiled float8 training runs whose autotuner picked one.

The dry run (``--fp8-dry-run``, on the CPU): the same body on inductor's C++ backend, which
autotunes no pointwise kernel (``max_autotune`` selects GEMM templates only), so instead of the
candidates it compiles with each option its pointwise code generation honours: the default
(vectorized, transposes in 32x32 tiles with tails), ``max-autotune`` and ``cpp.simdlen=1`` (scalar
loops). To keep it cheap it runs one shape (33x130, a tail in both dimensions of the tiles), all
variants for ``static_t`` and the default compile alone for the other programs; ``--fp8-slow``
runs every variant and each program's GPU shapes there too."""

import pytest

from fp8ref.harness.casts import transposed_stores as ts

# Triton writes E4M3 (float8e4nv) only from sm89 on
pytestmark = pytest.mark.sm(89, "Triton's float8 stores")

DRY_RUN_FULL = "static_t"  # the program the cheap dry run compiles every way


PROGRAMS = [pytest.param(p, marks=pytest.mark.needs("torchao")) if p == "torchao_t" else p for p in sorted(ts.PROGRAMS)]


@pytest.mark.parametrize("program", PROGRAMS)
def test_compiled_transposed_fp8_stores_match_eager_and_the_codec(program, gpu_device, dry_run, request, fresh_dynamo):
    shapes, only = ts.SHAPES_OF[program], None
    if dry_run and not request.config.getoption("--fp8-slow"):
        shapes = ts.DRY_RUN_SHAPES
        only = None if program == DRY_RUN_FULL else ("default",)
    problems = [p for shape in shapes if (p := ts.check_transposed_store(program, shape, gpu_device, only=only))]
    assert not problems, "\n".join(problems)
