"""Probes of ``torch._scaled_mm`` that measure what a device's FP8 GEMM does, beyond pass/fail.

- ``accumulator_bits``: how many mantissa bits the GEMM's accumulator keeps. Hopper's "fast
  accumulation" is known to keep about 13-14 (DeepSeek-V3's report, section 3.3); a check such as
  DeepGEMM's ``calc_diff < 1e-3`` cannot tell 14 bits from 23, so the profile pins the number.
- ``scale_result_rule``: what ``scale_result`` does to an FP8 output (divides, multiplies, or is
  ignored: a refactor once silently ignored it).
- ``reference_bound``: the exact product of the FP8 values and the error a correct GEMM may add.

Every input here is built so the exact answer is known: products of two FP8 values are exact in
float32, and the probes' sums are powers of two apart. Harness, not reference: these call the
implementation under test.
"""

from __future__ import annotations

import torch

from ..reference.validate import boolean, instance

__all__ = ["PROBE_K", "accumulator_bits", "scale_result_rule", "reference_bound", "half_ulp"]

PROBE_K = 32  # the K of the probes: a multiple of 16, as cuBLAS requires
_TOP = 8  # 2^8 = 256: E4M3's largest power of two
_SPAN = 18  # exponents 8 .. -9: E4M3's normal and subnormal powers of two


def half_ulp(dtype: torch.dtype) -> float:
    """Half an ulp of ``dtype`` at 1 (the relative rounding error of one rounding)."""
    instance(dtype, torch.dtype, "dtype", "a torch.dtype")
    return torch.finfo(dtype).eps / 2


def _powers_of_two_probe(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A (32, K) and B (K, 32, column-major) in E4M3 with out[i, j] = 2^16 + 2^(16 - i - j) for
    i, j < 18 (and 0 elsewhere): a large and a small product, 0 to 34 binary places apart."""
    a = torch.zeros(32, PROBE_K)
    b = torch.zeros(32, PROBE_K)  # rows of B^T
    idx = torch.arange(_SPAN)
    a[idx, 0], b[idx, 0] = 2.0**_TOP, 2.0**_TOP
    a[idx, 1] = torch.exp2(_TOP - idx.float())
    b[idx, 1] = torch.exp2(_TOP - idx.float())
    e4m3 = torch.float8_e4m3fn
    return a.to(e4m3).to(device), b.to(e4m3).to(device).t()


def accumulator_bits(device: str = "cpu", fast_accum: bool = False) -> int:
    """The largest d such that every sum 2^16 + 2^(16-d') with d' <= d comes out exact in a
    float32 ``_scaled_mm`` output: the accumulator's mantissa bits. 23 is the float32 output's own
    limit (2^16 + 2^-8 is a tie that rounds to 2^16), so 23 means "at least 23"."""
    boolean(fast_accum, "fast_accum")
    A, B = _powers_of_two_probe(device)
    one = torch.tensor(1.0, device=device)
    out = (
        torch._scaled_mm(A, B, scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast_accum)
        .double()
        .cpu()
    )
    kept = -1
    for d in range(2 * _SPAN - 1):
        cells = [(i, d - i) for i in range(_SPAN) if 0 <= d - i < _SPAN]
        want = 2.0**16 + 2.0 ** (16 - d)
        if not all(out[i, j].item() == want for i, j in cells):
            break
        kept = d
    return kept


def scale_result_rule(device: str = "cpu", out_dtype: torch.dtype = torch.float8_e4m3fn) -> str:
    """What ``scale_result=4`` does to an FP8 output whose exact value is 2:
    ``divides`` (0.5), ``multiplies`` (8), ``ignored`` (2), or ``other: <value>``."""
    one = torch.tensor(1.0, device=device)
    a = torch.zeros(16, 32)
    b = torch.zeros(16, 32)
    a[:, 0], b[:, 0] = 1.0, 2.0  # every output element: 1 * 2 = 2, exactly
    A, B = a.to(torch.float8_e4m3fn).to(device), b.to(torch.float8_e4m3fn).to(device).t()
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
    accum_bits: int = 23,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact result of ``_scaled_mm(a, b, scale_a, scale_b, bias)`` in float64 and the error a
    correct kernel may add, elementwise.

    ``a`` (M, K) and ``b`` (K, N) are the FP8 operands; scales as ``_scaled_mm`` takes them
    (tensorwise: one value; rowwise: (M, 1) and (1, N)). Products of two FP8 values are exact; an
    accumulator with ``accum_bits`` mantissa bits errs by at most K * 2^-(accum_bits+1) of the
    magnitude sum per partial sum, the two scales add two float32 roundings (+3 terms), and the
    output rounds once: ``half_ulp(out_dtype) |ref| + (K + 3) 2^-(accum_bits+1) m``."""
    va, vb = a.double().cpu(), b.double().cpu()
    sa, sb = scale_a.double().cpu(), scale_b.double().cpu()
    ref = (va @ vb) * sa * sb
    mag = (va.abs() @ vb.abs()) * (sa * sb).abs()
    if bias is not None:
        ref = ref + bias.double().cpu()
        mag = mag + bias.double().cpu().abs()
    k = va.shape[1]
    bound = half_ulp(out_dtype) * ref.abs() + (k + 3) * 2.0 ** -(accum_bits + 1) * mag
    return ref, bound
