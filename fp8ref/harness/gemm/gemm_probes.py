"""Probes of ``torch._scaled_mm`` that measure what a device's FP8 GEMM does, beyond pass/fail.

- ``accumulator_bits``: how many mantissa bits the GEMM's accumulator keeps, at two spans.
  ``within``: two products inside the first K block, which on Hopper is one tensor-core
  instruction: its tensor cores keep about 13-14 bits there whatever ``use_fast_accum`` says
  (DeepSeek-V3's report, section 3.3; B200 keeps about 25). ``across``: two products in different
  K blocks, ``PROMOTION_K`` apart: with ``use_fast_accum=False`` cuBLAS promotes the partial sums
  to float32 between blocks (CUTLASS every few instructions), so this is float32's 23; with fast
  accumulation Hopper never promotes. ``PROMOTION_K`` (1024) is far beyond any promotion interval
  reported (DeepSeek-V3: 128 on Hopper), so a GEMM that promotes every 256 or 512 is no false alarm.
  A check such as DeepGEMM's ``calc_diff < 1e-3`` cannot tell 14 bits from 23, so the profile pins
  the numbers and only the promised one is asserted. No bound takes its accumulator from these
  answers (they are the device under test's): ``documented_accumulator`` gives the bounds theirs.
- ``promotion_interval``: how far apart two products must lie to be summed in float32, measured by
  sweeping the distance (``PROMOTION_SWEEP``), pinned rather than assumed.
- ``kernels_of`` (``kernel_names``): which kernels a call ran (torch.profiler: the CUDA kernels'
  names; on the CPU the GEMM ops), so a change of backend (cuBLASLt's outer-vector scaling instead of CUTLASS, say) is
  one line of a profile diff; ``scaled_mm_kernels`` asks it for each scaling.
- ``scale_result_rule``: what ``scale_result`` does to an FP8 output (divides, multiplies, or is
  ignored: a refactor once silently ignored it).
- ``reference_bound``: the exact product of the FP8 values and the error a correct GEMM may add.

Every input here is built so the exact answer is known: products of two FP8 values are exact in
float32, and the probes' sums are powers of two apart. Harness, not reference: these call the
implementation under test.

Split-K: a GEMM may split K among thread blocks and add their partial sums afterwards. torch's
CUDA ``_scaled_mm`` takes the one algorithm cuBLASLt's heuristic returns and asks for no split or
reduction scheme (``scaled_gemm``, aten/src/ATen/cuda/CUDABlas.cpp), and the heuristic splits K
(``CUBLASLT_ALGO_CONFIG_SPLITK_NUM``, or stream-K's shared tiles) most readily where the output's
tiles are too few to fill the SMs: a 32 x 32 output over K = 2048 is the textbook case. The parts'
sums are added in float32 for the float32 output the probes ask for (every
``CUBLASLT_REDUCTION_SCHEME``: the compute type, the output type, or in place), so a split adds
float32 additions and can only raise the bits a probe reads: it would be taken for promotion. On
CUDA each probe is therefore laid out ``CUDA_REPLICAS`` x ``CUDA_REPLICAS`` times (a 4096 x 4096
output: over a thousand 128 x 128 tiles, several waves on any H100/H200/B200, the shape a
heuristic fills with whole tiles, as a training GEMM's), and its answer is the least over every
copy: the answer of any copy whose K range one thread block summed whole, split elsewhere or not.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

from ...reference.validate import boolean, instance, one_of
from ..stack.refusals import attempt, call, malformed

__all__ = [
    "PROBE_K",
    "PROMOTION_SWEEP",
    "promotion_interval",
    "interval_products",
    "accumulation_bound",
    "kineto_quiet",
    "kernel_names",
    "kernels_of",
    "scaled_mm_kernels",
    "PROMOTION_K",
    "SPANS",
    "CUDA_REPLICAS",
    "probe_replicas",
    "operand_dtypes",
    "exact_sum_operands",
    "accumulator_bits",
    "scale_result_rule",
    "reference_bound",
    "half_ulp",
]

PROBE_K = 32  # the K of the probes: a multiple of 16, as cuBLAS requires
# How far apart the "across" probe puts its two products: beyond the promotion interval of any FP8
# GEMM reported (DeepSeek-V3's N_C = 128 on Hopper, four WGMMA instructions of K = 32), so that
# promoting every 256 or 512 products is not taken for no promotion at all
PROMOTION_K = 1024
# the distances ``promotion_interval`` tries (K grows with them: 2 x the distance)
PROMOTION_SWEEP = (16, 32, 64, 128, 256, 512, 1024)
SPANS = ("within", "across")
# copies of a probe's 32 x 32 output block per side on CUDA (module docstring: split-K); the CPU's
# _scaled_mm sums each output in one pass, so one copy there
CUDA_REPLICAS = 128
T = TypeVar("T")
_TOP = 8  # 2^8 = 256: E4M3's largest power of two
_SPAN = 18  # exponents 8 .. -9: E4M3's normal and subnormal powers of two


def operand_dtypes(out_dtype: torch.dtype) -> tuple[torch.dtype, torch.dtype]:
    """The FP8 operand dtypes (A, B) to ask ``_scaled_mm`` for an ``out_dtype`` result with: E4M3
    x E5M2 for an E5M2 output (cuBLAS has no E4M3 x E4M3 -> E5M2 kernel; torch's own
    test_scaled_matmul_cuda.py pairs E4M3 with E5M2 there), E4M3 x E4M3 otherwise."""
    instance(out_dtype, torch.dtype, "out_dtype", "a torch.dtype")
    e4m3 = torch.float8_e4m3fn
    return (e4m3, torch.float8_e5m2) if out_dtype == torch.float8_e5m2 else (e4m3, e4m3)


# |values| <= 2, so |products| <= 4 and every partial sum of K <= 1024 of them is an integer of at
# most 2^12: exact in an accumulator of 12 significant bits or more (Hopper's within-instruction
# accumulator keeps about 14)
_EXACT_MAX, _EXACT_K = 2, 1024


def exact_sum_operands(m: int, k: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8-representable operands (M, K) and (N, K), float32, whose products' partial sums are
    exact in any FP8 GEMM accumulator, in any order: small integers (-2 .. 2). A GEMM of them
    errs only where its scales and its output round (``reference_bound(accum_bits=None)``)."""
    for name, v in (("m", m), ("k", k), ("n", n)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    if k > _EXACT_K:
        raise ValueError(f"k: at most {_EXACT_K} keeps every partial sum exact in 12 bits, got {k}")
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(-_EXACT_MAX, _EXACT_MAX + 1, (m, k), generator=gen).float()
    b = torch.randint(-_EXACT_MAX, _EXACT_MAX + 1, (n, k), generator=gen).float()
    return a, b


def half_ulp(dtype: torch.dtype) -> float:
    """Half an ulp of ``dtype`` at 1 (the relative rounding error of one rounding)."""
    instance(dtype, torch.dtype, "dtype", "a torch.dtype")
    return torch.finfo(dtype).eps / 2


def probe_replicas(device: str) -> int:
    """How many copies of a probe's 32 x 32 output block ``accumulator_bits`` and
    ``promotion_interval`` lay out per side on ``device`` (module docstring: split-K)."""
    return 1 if torch.device(device).type == "cpu" else CUDA_REPLICAS


def _powers_of_two_probe(
    device: str, span: str = "within", at: int | None = None, replicas: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """A (32 R, K) and B (K, 32 R, column-major) in E4M3, R = ``replicas``, with out[i, j] =
    2^16 + 2^(16 - i - j) for i, j < 18 (and 0 elsewhere) in every 32 x 32 block: a large and a
    small product, 0 to 34 binary places apart; the small one at k = 1 (``within`` the first K
    block), at k = PROMOTION_K + 1 (``across``), or at k = ``at``."""
    if at is not None:
        k, small = 2 * at, at
    else:
        k, small = (PROBE_K, 1) if span == "within" else (2 * PROMOTION_K, PROMOTION_K + 1)
    a = torch.zeros(32, k)
    b = torch.zeros(32, k)  # rows of B^T
    idx = torch.arange(_SPAN)
    a[idx, 0], b[idx, 0] = 2.0**_TOP, 2.0**_TOP
    a[idx, small] = torch.exp2(_TOP - idx.float())
    b[idx, small] = torch.exp2(_TOP - idx.float())
    e4m3 = torch.float8_e4m3fn
    a, b = a.repeat(replicas, 1), b.repeat(replicas, 1)
    return a.to(e4m3).to(device), b.to(e4m3).to(device).t()


def accumulator_bits(
    device: str = "cpu", fast_accum: bool = False, span: str = "within", replicas: int | None = None
) -> int:
    """The largest d such that every sum 2^16 + 2^(16-d') with d' <= d comes out exact in a
    float32 ``_scaled_mm`` output: the accumulator's mantissa bits ``within`` one K block or
    ``across`` two (module docstring). 23 is the float32 output's own limit (2^16 + 2^-8 is a tie
    that rounds to 2^16), so 23 means "at least 23". ``replicas``: copies of the probe per side
    (default ``probe_replicas(device)``); the answer is the least over them."""
    boolean(fast_accum, "fast_accum")
    one_of(span, SPANS, "span")
    r = _replicas(device, replicas)
    return _once(
        ("bits", device, fast_accum, span, r),
        lambda: _bits(device, fast_accum, r, *_powers_of_two_probe(device, span, replicas=r)),
    )


# A GPU's answers, once per process: the same GEMM answers the same (the checks' bounds ask again
# and again). On the CPU every call probes afresh: tests hand the probes stand-ins there.
_ANSWERS: dict[tuple, object] = {}


def _once(key: tuple, probe: Callable[[], T]) -> T:
    if torch.device(key[1]).type == "cpu":
        return probe()
    if key not in _ANSWERS:
        _ANSWERS[key] = probe()
    return _ANSWERS[key]  # type: ignore[return-value]


def _replicas(device: str, replicas: int | None) -> int:
    if replicas is None:
        return probe_replicas(device)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise ValueError(f"replicas: expected a positive int, got {replicas!r}")
    return replicas


def promotion_interval(device: str = "cpu", fast_accum: bool = False, replicas: int | None = None) -> str:
    """The smallest distance of ``PROMOTION_SWEEP`` at which two products (the large one at k = 0)
    are summed with float32's 23 bits, while at the distance before it they are not: the GEMM's
    promotion interval, as ``"128"``; ``"every product"`` when the first distance already keeps 23
    (a float32 accumulator throughout, as on the CPU); ``"none up to 1024"`` when no distance does
    (no promotion, as Hopper's fast accumulation). ``replicas`` as in ``accumulator_bits``."""
    boolean(fast_accum, "fast_accum")
    r = _replicas(device, replicas)
    kept = {
        d: _once(
            ("at", device, fast_accum, d, r),
            lambda d=d: _bits(device, fast_accum, r, *_powers_of_two_probe(device, at=d, replicas=r)),  # type: ignore[misc]
        )
        for d in PROMOTION_SWEEP
    }
    if kept[PROMOTION_SWEEP[0]] >= 23:
        return "every product"
    first = next((d for d in PROMOTION_SWEEP if kept[d] >= 23), None)
    return f"none up to {PROMOTION_SWEEP[-1]}" if first is None else str(first)


def interval_products(interval: str) -> int | None:
    """``promotion_interval``'s answer as a number of products: 1 for every product, None for no
    promotion within the distances swept."""
    if interval == "every product":
        return 1
    if interval.startswith("none"):
        return None
    return int(interval)


def accumulation_bound(k: int, within_bits: int, interval: int | None) -> float:
    """How far one summation of ``k`` exact products, times two float32 scales, may land from the
    exact result, relative to the magnitude sum m = sum |a_i b_i| (first order): for an
    accumulator that keeps ``within_bits`` mantissa bits inside blocks of ``interval`` products
    and float32's 23 between blocks (``interval`` None: no promotion, one block of k). Each
    addition rounds once, by at most half an ulp of its result, itself at most m: interval - 1
    roundings at 2^-(within_bits + 1) inside each block, and ceil(k / interval) + 3 at 2^-24 (the
    block sums added in float32, the two scales). Two summations in different orders (two kernels)
    differ by at most twice this."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected a positive int, got {k!r}")
    if not isinstance(within_bits, int) or not 0 <= within_bits <= 52:
        raise ValueError(f"within_bits: expected an int in [0, 52], got {within_bits!r}")
    n = k if interval is None else min(max(1, interval), k)
    return (n - 1) * 2.0 ** -(within_bits + 1) + (math.ceil(k / n) + 3) * 2.0**-24


# Kineto, torch.profiler's backend, writes its start and stop (USDT lines) and, on a CUDA build
# without a GPU, "gpuGetDeviceCount failed" to stderr from C++, whatever Python's logging says; a
# probe that asks which kernel ran has no use for them. Above its highest level (5, USDT) it
# writes nothing. It reads KINETO_LOG_LEVEL once, when the process first profiles.
_KINETO_SILENT = "6"


@contextlib.contextmanager
def kineto_quiet() -> Iterator[None]:
    """KINETO_LOG_LEVEL set to silent for the block unless the user set it (their level wins),
    and the environment given back as it was after."""
    if "KINETO_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["KINETO_LOG_LEVEL"] = _KINETO_SILENT
    try:
        yield
    finally:
        os.environ.pop("KINETO_LOG_LEVEL", None)


def kernel_names(fn: Callable[[], object], device: str = "cpu") -> list[str]:
    """The kernels ``fn()`` ran, in order, each once: on a CUDA device the device kernels
    torch.profiler records (copies and memsets left out); on the CPU the aten GEMM ops (names
    holding "mm" or "gemm"), the CPU's view of which path ran."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with kineto_quiet(), profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    names = []
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        name = event.name
        if cuda:
            if event.device_type == torch.autograd.DeviceType.CUDA and not name.startswith(("Memcpy", "Memset")):
                names.append(name)
        elif name.startswith("aten::") and ("mm" in name or "gemm" in name):
            names.append(name)
    return list(dict.fromkeys(names))


def kernels_of(fn: Callable[[], object], device: str = "cpu") -> str:
    """``kernel_names`` joined by " > ", or "none recorded" if none."""
    return " > ".join(kernel_names(fn, device)) or "none recorded"


def scaled_mm_kernels(scaling: str, device: str = "cpu") -> str:
    """``kernels_of`` a bfloat16 ``torch._scaled_mm`` with ``scaling`` scales (tensorwise or rowwise)
    on 256 x 256 x 256 E4M3 operands."""
    one_of(scaling, ("tensorwise", "rowwise"), "scaling")
    A, B, _ = _exact_problem(256, 256, 256, device)
    if scaling == "tensorwise":
        sa = sb = torch.tensor(1.0, device=device)
    else:
        sa, sb = torch.ones(256, 1, device=device), torch.ones(1, 256, device=device)
    return kernels_of(lambda: torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), device)


def _bits(device: str, fast_accum: bool, replicas: int, A: torch.Tensor, B: torch.Tensor) -> int:
    """The probe's answer: the largest d whose sums come out exact in every copy of the 32 x 32
    block (the least over the copies: module docstring, split-K)."""
    one = torch.tensor(1.0, device=device)
    out = (
        torch._scaled_mm(A, B, scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast_accum)
        .double()
        .cpu()
    )
    blocks = out.reshape(replicas, 32, replicas, 32)
    kept = -1
    for d in range(2 * _SPAN - 1):
        rows = [i for i in range(_SPAN) if 0 <= d - i < _SPAN]
        want = 2.0**16 + 2.0 ** (16 - d)
        # cells (i, d - i) of every block: shape (cells, replicas, replicas)
        if not bool((blocks[:, rows, :, [d - i for i in rows]] == want).all()):
            break
        kept = d
    return kept


def scale_result_rule(device: str = "cpu", out_dtype: torch.dtype = torch.float8_e4m3fn) -> str:
    """What ``scale_result=4`` does to an FP8 output whose exact value is 2:
    ``divides`` (0.5), ``multiplies`` (8), ``ignored`` (2), or ``other: <value>``. The operands
    are the pair the output needs (``operand_dtypes``)."""
    one = torch.tensor(1.0, device=device)
    a = torch.zeros(16, 32)
    b = torch.zeros(16, 32)
    a[:, 0], b[:, 0] = 1.0, 2.0  # every output element: 1 * 2 = 2, exactly
    a_dtype, b_dtype = operand_dtypes(out_dtype)
    A, B = a.to(a_dtype).to(device), b.to(b_dtype).to(device).t()
    y = (
        torch._scaled_mm(
            A, B, scale_a=one, scale_b=one, scale_result=torch.tensor(4.0, device=device), out_dtype=out_dtype
        )
        .float()
        .cpu()
    )
    values = set(y.flatten().tolist())
    if len(values) != 1:
        return f"other: {sorted(values)[:4]}"
    v = values.pop()
    return {0.5: "divides", 8.0: "multiplies", 2.0: "ignored"}.get(v, f"other: {v!r}")


def reference_bound(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    accum_bits: int | None = 23,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact result of ``_scaled_mm(a, b, scale_a, scale_b, bias)`` in float64 and the error a
    correct kernel may add, elementwise.

    ``a`` (M, K) and ``b`` (K, N) are the FP8 operands; scales as ``_scaled_mm`` takes them
    (tensorwise: one value; rowwise: (M, 1) and (1, N)). Products of two FP8 values are exact; an
    accumulator with ``accum_bits`` mantissa bits errs by at most K * 2^-(accum_bits+1) of the
    magnitude sum per partial sum, the two scales add two float32 roundings (+3 terms), and the
    output rounds once: ``half_ulp(out_dtype) |ref| + (K + 3) 2^-(accum_bits+1) m``.

    ``accum_bits=None``: operands whose every partial sum is exact in any accumulator (small
    integers, ``exact_sum_operands``): only the scales' float32 roundings and the output's
    rounding remain, so the bound stays as sharp as the output dtype on every GPU generation."""
    va, vb = a.double().cpu(), b.double().cpu()
    sa, sb = scale_a.double().cpu(), scale_b.double().cpu()
    ref = (va @ vb) * sa * sb
    mag = (va.abs() @ vb.abs()) * (sa * sb).abs()
    if bias is not None:
        ref = ref + bias.double().cpu()
        mag = mag + bias.double().cpu().abs()
    k = va.shape[1]
    accum = 3 * 2.0**-24 if accum_bits is None else (k + 3) * 2.0 ** -(accum_bits + 1)
    bound = half_ulp(out_dtype) * ref.abs() + accum * mag
    return ref, bound


def _exact_problem(m: int, k: int, n: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E4M3 operands A (M, K) row-major and B (K, N) column-major from ``exact_sum_operands`` on
    ``device``, and their exact product in float64 (CPU)."""
    a, b = exact_sum_operands(m, k, n, seed=m + 7 * k + 13 * n)
    e4m3 = torch.float8_e4m3fn
    return a.to(e4m3).to(device), b.to(e4m3).to(device).t(), a.double() @ b.double().t()


def scale_forms_and_shapes(device: str = "cpu") -> dict[str, str]:
    """Which forms of the scale arguments and which shapes ``torch._scaled_mm`` takes on
    ``device``, each ``ok`` (the result is right: within one float32 rounding of the scaled exact
    product, which small-integer operands make sharp), ``wrong: <worst error>`` (a bug), the
    install's ``refused: ...``, or ``not documented: ...`` for a form torch's meta registration
    rejects (its words; a malformed call is not made: no answer to it is the install's refusal).
    Keys: ``tensorwise.<form>`` (0-d, one-element 1-D, 1x1),
    ``rowwise.<form>`` ((M,1)x(1,N), (M,)x(N,), (M,1)x(N,1)) and ``shape.<which dim>`` (M, K or N
    not a multiple of 16)."""
    m, k, n = 32, 64, 48
    rows = torch.linspace(0.5, 3.0, m, dtype=torch.float64)
    cols = torch.linspace(0.25, 2.0, n, dtype=torch.float64)
    cases = {
        "tensorwise.0d": ((m, k, n), torch.tensor(1.5), torch.tensor(0.75)),
        "tensorwise.1": ((m, k, n), torch.tensor([1.5]), torch.tensor([0.75])),
        "tensorwise.1x1": ((m, k, n), torch.tensor([[1.5]]), torch.tensor([[0.75]])),
        "rowwise.Mx1_1xN": ((m, k, n), rows.float()[:, None], cols.float()[None, :]),
        "rowwise.M_N": ((m, k, n), rows.float(), cols.float()),
        "rowwise.Mx1_Nx1": ((m, k, n), rows.float()[:, None], cols.float()[:, None]),
        "shape.M": ((60, k, n), torch.tensor(1.5), torch.tensor(0.75)),
        "shape.K": ((m, 120, n), torch.tensor(1.5), torch.tensor(0.75)),
        "shape.N": ((m, k, 40), torch.tensor(1.5), torch.tensor(0.75)),
    }
    out = {}
    for key, ((mm_, kk, nn), sa, sb) in cases.items():
        A, B, exact = _exact_problem(mm_, kk, nn, device)

        kwargs = {"scale_a": sa.to(device), "scale_b": sb.to(device), "out_dtype": torch.float32}
        undocumented = malformed("torch._scaled_mm", (A, B), kwargs)
        if undocumented is not None:
            out[key] = f"not documented: {undocumented}"
            continue

        def mm(A: torch.Tensor = A, B: torch.Tensor = B, kwargs: dict = kwargs) -> torch.Tensor:
            return call("torch._scaled_mm", A, B, **kwargs)

        ok, got = attempt(mm, device)
        if not ok:
            out[key] = str(got)
            continue
        sa64, sb64 = sa.double().reshape(-1), sb.double().reshape(-1)
        scales = (sa64[:, None] if sa64.numel() > 1 else sa64) * (sb64[None, :] if sb64.numel() > 1 else sb64)
        want = exact * scales
        err = (torch.as_tensor(got).double().cpu() - want).abs()
        # the scales' float32 roundings and the output's; a kernel that dequantizes before it
        # accumulates (torch's CPU path) adds float32 accumulation of the scaled products
        mag = (A.cpu().double().abs() @ B.cpu().double().abs()) * scales.abs()
        bound = 4 * 2.0**-24 * want.abs() + (kk + 3) * 2.0**-24 * mag
        out[key] = "ok" if bool((err <= bound).all()) else f"wrong: max error {err.max().item():.3g}"
    return out
