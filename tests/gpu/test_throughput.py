"""Throughput on the GPU: FP8 _scaled_mm vs bf16 mm on LLM projection shapes, FP4 vs FP8 vs bf16,
Float8Linear forward+backward vs nn.Linear per recipe, and one training step, both compiled. The
ratios come from fp8ref.harness.speed.bench.device_time (CUDA events over back-to-back calls,
warm-up excluded) and go into the benchmark JSON (extra_info) and the "FP8 throughput" table at the
end of the run.

Speed is never asserted (shared, noisy machines): the ratios are reported. What each test asserts
is that the path it times as FP8 ran FP8 GEMMs (fp8ref.harness.speed.fp8_path): the scaled GEMM
ops one call dispatches (one per FP8 GEMM; none in the bf16 path), and on CUDA that no kernel of
the bf16 GEMM ran inside the FP8 call (an FP8 call fallen back to a bf16 GEMM of upcast operands
would time that). Marked benchmark: run with `pytest -m gpu` (they are gpu tests) or
`pytest -m "gpu and benchmark"`; the --fp8-dry-run (CPU, tiny shapes) runs the same assertions."""

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch

from fp8ref.harness.speed.bench import LLM_GEMM_SHAPES, device_time, scaled_mm_vs_bf16, synchronized_clock
from fp8ref.harness.speed.fp8_path import scaled_mm_calls, shared_gemm_kernels
from fp8ref.harness.stack import probes
from fp8ref.reference.recipes import RECIPES

pytestmark = [pytest.mark.benchmark, pytest.mark.sm(89, "FP8 tensor cores"), pytest.mark.needs("pytest_benchmark")]

DRY_SHAPE = (64, 128, 64)


def _bench(benchmark: Any, fn: Callable[[], object], device: str, rounds: int = 10) -> Any:
    """pytest-benchmark's value for ``fn`` as device time: its timer reads the clock only once the
    CUDA queue has drained (``synchronized_clock``), so each round times back-to-back launches to
    completion, warm-up excluded. (pytest-benchmark 4-5 keep the timer in ``_timer``; the public
    way is ``--benchmark-timer fp8ref.harness.speed.bench.synchronized_clock``, which scripts/gpu_check.sh
    passes.)"""
    if device == "cuda" and hasattr(benchmark, "_timer"):
        benchmark._timer = synchronized_clock
    benchmark.extra_info["timer"] = "synchronized_clock" if device == "cuda" else "pytest-benchmark's own"
    return benchmark.pedantic(fn, rounds=rounds, iterations=5, warmup_rounds=1)


def _ran_fp8(
    what: str, fp8: Callable[[], object], bf16: Callable[[], object], device: str, gemms: int, kernels: bool = True
) -> None:
    """``fp8()`` dispatched ``gemms`` scaled GEMM ops, ``bf16()`` none; with ``kernels`` (``bf16``
    a bare GEMM, so every kernel it runs is the bf16 GEMM's), on CUDA ``fp8()`` ran none of them.
    A whole training step runs elementwise and optimizer kernels in both paths: its GEMMs are
    counted by op only, and the GEMM kernels themselves are compared by the bare-GEMM tests."""
    calls, hp_calls = scaled_mm_calls(fp8), scaled_mm_calls(bf16)
    assert (calls, hp_calls) == (gemms, 0), (
        f"{what} on {device}: scaled GEMM ops per call: expected {gemms} in the FP8 path and 0 in the bf16 one, "
        f"got {calls} and {hp_calls}"
    )
    shared = shared_gemm_kernels(fp8, bf16, device) if kernels else []
    assert not shared, f"{what} on {device}: the FP8 call ran the bf16 GEMM's kernels {shared}"


@pytest.mark.parametrize("name,m,k,n", LLM_GEMM_SHAPES, ids=[s[0] for s in LLM_GEMM_SHAPES])
def test_scaled_mm_runs_an_fp8_gemm_timed_against_bf16_mm(
    name, m, k, n, gpu_device, dry_run, benchmark, record_throughput
):
    if dry_run:
        m, k, n = DRY_SHAPE
    row = scaled_mm_vs_bf16(m, k, n, device=gpu_device, repeat=3 if dry_run else 10)
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
    a8 = a.to(gpu_device).to(torch.float8_e4m3fn)
    b8 = b.to(gpu_device).to(torch.float8_e4m3fn).t()
    a16, b16 = a.to(gpu_device, torch.bfloat16), b.to(gpu_device, torch.bfloat16).t()
    one = torch.tensor(1.0, device=gpu_device)

    def fp8():
        return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

    out = _bench(benchmark, fp8, gpu_device)
    benchmark.extra_info.update(row)
    record_throughput(
        {"name": f"scaled_mm {name} ({m}x{k}x{n})", **{k_: v for k_, v in row.items() if k_ not in ("m", "k", "n")}}
    )
    assert out.shape == (m, n) and out.dtype == torch.bfloat16, (tuple(out.shape), out.dtype)
    _ran_fp8(f"scaled_mm {name}", fp8, lambda: a16 @ b16, gpu_device, gemms=1)


def _train_step(
    model: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor, opt: torch.optim.Optimizer | None = None
) -> Callable[[], None]:
    """One forward and backward with a real (random, full-stride) output gradient; the parameters'
    gradients and the input's (where it takes one, for the input-gradient GEMM) are dropped before
    each step, so every timed step does the same work and nothing accumulates across them."""

    def step():
        if opt is None:
            model.zero_grad(set_to_none=True)
        else:
            opt.zero_grad(set_to_none=True)
        x.grad = None
        model(x).backward(grad)
        if opt is not None:
            opt.step()

    return step


def _compiled(model: torch.nn.Module, dry_run: bool) -> Any:
    """torch.compile'd on CUDA (torchao's casts fuse only when compiled); eager in the CPU dry run,
    which only keeps the test alive."""
    return model if dry_run else torch.compile(model, dynamic=False)


@pytest.mark.gpu_long
@pytest.mark.needs("torchao")
@pytest.mark.parametrize("recipe", ["tensorwise", pytest.param("rowwise", marks=pytest.mark.sm(90, "rowwise"))])
def test_compiled_float8linear_runs_its_fp8_gemms_timed_against_linear(
    recipe, gpu_device, dry_run, benchmark, record_throughput, fresh_dynamo
):
    """Compiled Float8Linear forward+backward against compiled nn.Linear, each timed with CUDA
    events over back-to-back steps after warm-up (compilation excluded); asserted: a timed FP8
    step runs the recipe's FP8 GEMMs (output, input and weight gradient), the bf16 step none."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    tokens, d_in, d_out = (64, 128, 256) if dry_run else (16384, 4096, 14336)
    lin = torch.nn.Sequential(torch.nn.Linear(d_in, d_out, bias=False)).to(torch.bfloat16).to(gpu_device)
    f8 = convert_to_float8_training(copy.deepcopy(lin), config=Float8LinearConfig.from_recipe_name(recipe))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d_in, generator=gen).to(gpu_device, torch.bfloat16).requires_grad_()
    grad = torch.randn(tokens, d_out, generator=gen).to(gpu_device, torch.bfloat16)
    hp_step, f8_step = _train_step(_compiled(lin, dry_run), x, grad), _train_step(_compiled(f8, dry_run), x, grad)
    iters = 3 if dry_run else 20
    t_bf16, t_fp8 = device_time(hp_step, iters=iters), device_time(f8_step, iters=iters)
    _bench(benchmark, f8_step, gpu_device, rounds=3 if dry_run else 10)
    row = {"bf16_ms": 1e3 * t_bf16, "fp8_ms": 1e3 * t_fp8, "fp8_speedup": t_bf16 / t_fp8}
    benchmark.extra_info.update(row)
    record_throughput({"name": f"Float8Linear {recipe} fwd+bwd, compiled ({tokens}x{d_in}->{d_out})", **row})
    _ran_fp8(f"Float8Linear {recipe} fwd+bwd", f8_step, hp_step, gpu_device, gemms=_fp8_gemms(recipe), kernels=False)


def _fp8_gemms(recipe: str) -> int:
    """How many of a linear layer's three GEMMs the recipe runs in FP8 (fp8ref's recipe table)."""
    table = RECIPES[recipe].describe()
    return sum(table[f"{gemm}.a"] != "high-precision" for gemm in ("output", "grad_input", "grad_weight"))


@pytest.mark.gpu_long
@pytest.mark.needs("torchao")
def test_compiled_fp8_training_step_runs_its_fp8_gemms_timed_against_bf16(
    gpu_device, dry_run, benchmark, record_throughput, fresh_dynamo
):
    """A compiled MLP stack's full AdamW step, bf16 against torchao tensorwise FP8, each timed;
    asserted: a timed FP8 step runs every linear's three GEMMs in FP8, the bf16 step none."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    d, layers, tokens = (128, 2, 64) if dry_run else (4096, 4, 8192)

    def model():
        torch.manual_seed(0)
        blocks = [
            torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
            for _ in range(layers)
        ]
        return torch.nn.Sequential(*blocks).to(torch.bfloat16).to(gpu_device)

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d, generator=gen).to(gpu_device, torch.bfloat16)
    grad = torch.randn(tokens, d, generator=gen).to(gpu_device, torch.bfloat16)
    hp = model()
    f8 = convert_to_float8_training(model(), config=Float8LinearConfig.from_recipe_name("tensorwise"))
    steps = {
        name: _train_step(_compiled(m, dry_run), x, grad, torch.optim.AdamW(m.parameters(), lr=1e-4))
        for name, m in (("bf16", hp), ("fp8", f8))
    }
    iters = 3 if dry_run else 10
    t_bf16, t_fp8 = device_time(steps["bf16"], iters=iters), device_time(steps["fp8"], iters=iters)
    _bench(benchmark, steps["fp8"], gpu_device, rounds=3 if dry_run else 10)
    row = {"bf16_tokens_s": tokens / t_bf16, "fp8_tokens_s": tokens / t_fp8, "fp8_speedup": t_bf16 / t_fp8}
    benchmark.extra_info.update(row)
    record_throughput({"name": f"training step, compiled ({layers} MLP blocks, d={d}, {tokens} tokens)", **row})
    linears = sum(isinstance(mod, torch.nn.Linear) for mod in f8.modules())  # (Float8Linear is one)
    assert linears == 2 * layers, f"{linears} linear layers in the FP8 model, expected {2 * layers}"
    _ran_fp8(
        "training step",
        steps["fp8"],
        steps["bf16"],
        gpu_device,
        gemms=linears * _fp8_gemms("tensorwise"),
        kernels=False,
    )


@pytest.mark.sm(100, "FP4 block-scaled tensor cores")
@pytest.mark.parametrize("name,m,k,n", LLM_GEMM_SHAPES, ids=[s[0] for s in LLM_GEMM_SHAPES])
def test_fp4_vs_fp8_vs_bf16_gemm_throughput(
    name, m, k, n, gpu_device, dry_run, skip_if_refused, benchmark, record_throughput
):
    """MXFP4 and NVFP4 against FP8 (tensorwise, fast accumulation) and bf16 mm on one shape, each
    timed with CUDA events; block scales prepared outside the timed calls. Each FP4 kind goes
    through the API this install accepts for it (``probes.fp4_gemm_api``); a kind no API runs is
    recorded in the row as refused, and the others are still timed. Asserted: each FP4 and FP8
    call is one scaled GEMM op that runs none of the bf16 GEMM's kernels."""
    from fp8ref.harness.gemm import fp4_gemm

    apis = {kind: probes.fp4_gemm_api(kind, torch.bfloat16, gpu_device) for kind in fp4_gemm.FP4_KINDS}
    if not any(apis.values()):
        skip_if_refused(probes.fp4_gemm_refusal("mxfp4", torch.bfloat16, gpu_device), f"FP4 GEMMs on {gpu_device}")
    if dry_run:
        m, k, n = DRY_SHAPE
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
    a16, b16 = a.to(gpu_device, torch.bfloat16), b.to(gpu_device, torch.bfloat16).t()
    a8, b8 = a.to(gpu_device).to(torch.float8_e4m3fn), b.to(gpu_device).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=gpu_device)
    x2 = torch.float4_e2m1fn_x2
    a4 = torch.randint(0, 256, (m, k // 2), generator=gen, dtype=torch.uint8).view(x2).to(gpu_device)
    b4 = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8).view(x2).to(gpu_device).t()

    def scales(kind: str) -> tuple[torch.Tensor, ...]:
        return tuple(fp4_gemm.blocked_scales(kind, fp4_gemm.unit_scales(kind, rows, k), gpu_device) for rows in (m, n))

    calls = {
        "bf16": lambda: a16 @ b16,
        "fp8": lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16, use_fast_accum=True),
    }
    for kind, api in apis.items():
        if api is not None:
            sa, sb = scales(kind)
            calls[kind] = lambda kind=kind, api=api, sa=sa, sb=sb: fp4_gemm.call_packed(
                api, kind, a4, b4, sa, sb, torch.bfloat16
            )
    iters = 3 if dry_run else 20
    ms = {key: 1e3 * device_time(fn, iters=iters) for key, fn in calls.items()}
    _bench(benchmark, calls[next(k for k in ("nvfp4", "mxfp4") if k in calls)], gpu_device)
    row: dict = {f"{key}_ms": v for key, v in ms.items()}
    row |= {f"{key}_over_bf16": ms["bf16"] / ms[key] for key in ms if key != "bf16"}
    row |= {
        f"{kind}_api": api or f"refused ({probes.fp4_gemm_refusal(kind, torch.bfloat16, gpu_device)})"
        for kind, api in apis.items()
    }
    benchmark.extra_info.update(row)
    record_throughput({"name": f"FP4 vs FP8 vs bf16 GEMM {name} ({m}x{k}x{n})", **row})
    for key in calls.keys() - {"bf16"}:
        _ran_fp8(f"{key} GEMM {name}", calls[key], calls["bf16"], gpu_device, gemms=1)
