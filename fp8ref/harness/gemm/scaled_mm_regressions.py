"""``torch._scaled_mm`` against the exact product of its FP8 operands, for the arguments real
regressions shipped in, for tests/cpu/install/test_scaled_mm.py's tests (each parametrized by
device: the CPU and CUDA) and tests/meta: each check takes the device.

Operands come from fp8ref's codec (quantize), the reference from its decode, so nothing in the
reference runs the cast or GEMM under test. Rows and columns are given magnitudes up to 2^6
apart, so rowwise scales differ per row and per column by large factors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo

from ...reference.codec import encode
from ...reference.formats import E4M3FN, E5M2
from ...reference.quantize import quantize
from ...reference.scaling import axiswise, tensorwise
from ..stack import probes
from ..stack.refusals import attempt
from .gemm_probes import (
    PROMOTION_K,
    accumulator_bits,
    exact_sum_operands,
    kernels_of,
    operand_dtypes,
    promotion_interval,
    reference_bound,
    scale_forms_and_shapes,
    scale_result_rule,
)

E4M3 = torch.float8_e4m3fn


@dataclass
class Case:
    A: torch.Tensor  # (M, K) E4M3, row-major, on the device
    B: torch.Tensor  # (K, N) E4M3, column-major, on the device
    scale_a: torch.Tensor  # dequantization scales as _scaled_mm takes them, on the device
    scale_b: torch.Tensor
    va: torch.Tensor  # the operands' values (codec decode), float64, CPU
    vb: torch.Tensor
    exact: bool = False  # small-integer operands: every partial sum exact in any accumulator


def case(
    m: int,
    k: int,
    n: int,
    scaling: str,
    device: str,
    seed: int = 0,
    b_dtype: torch.dtype = E4M3,
    exact_sums: bool = False,
) -> Case:
    """FP8 operands for ``scaling`` (tensorwise: one non-unit scale each; rowwise: one per row of
    A and per column of B); A in E4M3, B in ``b_dtype`` (E4M3 or E5M2).

    ``exact_sums``: small-integer operands (``gemm_probes.exact_sum_operands``) whose partial sums
    are exact in any accumulator, with non-power-of-two scales: the bound is then the output's
    own rounding on every GPU generation (Hopper's ~14-bit accumulator included), sharp enough to
    see a float32 output that went through bfloat16."""
    gen = torch.Generator().manual_seed(seed)
    if exact_sums:
        av, bv = exact_sum_operands(m, k, n, seed)
        rows = torch.exp2(torch.randint(-3, 4, (m, 1), generator=gen).float()) * 1.37
        cols = torch.exp2(torch.randint(-3, 4, (1, n), generator=gen).float()) / 2.9
        sa, sb = (rows, cols) if scaling == "rowwise" else (torch.tensor(1.37), torch.tensor(1 / 2.9))
        b_fmt = E5M2 if b_dtype == torch.float8_e5m2 else E4M3FN
        return Case(
            encode(av, E4M3FN).view(E4M3).to(device),
            encode(bv, b_fmt).view(b_dtype).to(device).t(),
            sa.to(device),
            sb.to(device),
            av.double(),
            bv.double().t(),
            exact=True,
        )
    rows = torch.exp2(torch.randint(-3, 4, (m, 1), generator=gen).float())
    cols = torch.exp2(torch.randint(-3, 4, (n, 1), generator=gen).float())
    a = torch.randn(m, k, generator=gen) * rows * 1.37
    b = torch.randn(n, k, generator=gen) * cols / 2.9
    g = tensorwise() if scaling == "tensorwise" else axiswise(-1)
    qa, qb = quantize(a, E4M3FN, g), quantize(b, E5M2 if b_dtype == torch.float8_e5m2 else E4M3FN, g)
    inv_a, inv_b = 1 / qa.scale, 1 / qb.scale  # tensorwise (); rowwise (M, 1) and (N, 1)
    if scaling == "rowwise":
        inv_b = inv_b.t().contiguous()  # (1, N)
    return Case(
        qa.codes.view(E4M3).to(device),
        qb.codes.view(b_dtype).to(device).t(),
        inv_a.to(device),
        inv_b.to(device),
        qa.values().double(),
        qb.values().double().t(),
    )


# inductor with only its Triton GEMM templates to choose from: the compiled path that lowers
# _scaled_mm to a kernel of its own (without max-autotune it keeps the ATen call, eager's kernel)
MAX_AUTOTUNE_TRITON = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON"}


def scaled_mm_fn(
    out_dtype: torch.dtype, fast_accum: bool = False, compiled: bool | dict = False
) -> Callable[[Case, torch.Tensor | None], torch.Tensor]:
    """``_scaled_mm`` of a case (and a bias): eager, compiled (``True``), or compiled with these
    inductor options (a dict, e.g. ``MAX_AUTOTUNE_TRITON``), whole (fullgraph). A compiled one
    compiles at its first call; later calls run what it compiled."""

    def mm(A, B, sa, sb, bias):
        return torch._scaled_mm(A, B, scale_a=sa, scale_b=sb, bias=bias, out_dtype=out_dtype, use_fast_accum=fast_accum)

    fn = mm
    if compiled is not False:
        options = compiled if isinstance(compiled, dict) else None
        fn = torch.compile(mm, dynamic=False, fullgraph=True, options=options)

    def of_case(c: Case, bias: torch.Tensor | None = None) -> torch.Tensor:
        return fn(c.A, c.B, c.scale_a, c.scale_b, bias)

    return of_case


def run(
    c: Case,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    fast_accum: bool = False,
    compiled: bool | dict = False,
) -> torch.Tensor:
    """``scaled_mm_fn(out_dtype, fast_accum, compiled)`` called once on the case."""
    return scaled_mm_fn(out_dtype, fast_accum, compiled)(c, bias)


def excess(
    c: Case, out: torch.Tensor, out_dtype: torch.dtype, bias: torch.Tensor | None = None, accum_bits: int = 23
) -> str | None:
    """None when every element of ``out`` lies within the derived bound of the exact result;
    otherwise a line naming the worst element. An ``exact`` case is bounded as exact sums
    (``accum_bits`` does not apply)."""
    assert out.dtype == out_dtype, f"out dtype {out.dtype}, asked for {out_dtype}"
    assert out.shape == (c.va.shape[0], c.vb.shape[1]), f"out shape {tuple(out.shape)}"
    ref, bound = reference_bound(c.va, c.vb, c.scale_a, c.scale_b, out_dtype, bias, None if c.exact else accum_bits)
    err = (out.double().cpu() - ref).abs()
    bad = ~(err <= bound)  # NaN counts as bad
    if not bool(bad.any()):
        return None
    i, j = divmod(
        int(torch.argmax(torch.where(bad, err - bound, torch.zeros_like(err)).nan_to_num(1e300))), ref.shape[1]
    )
    return (
        f"{int(bad.sum())} of {bad.numel()} elements outside the bound; worst [{i}, {j}]: got "
        f"{out[i, j].item()!r}, exact {ref[i, j].item()!r}, bound {bound[i, j].item():.3e}"
    )


# --- a float64 stand-in for _scaled_mm with one known fault --------------------------------
def stand_in(
    keep_bits=None,
    scale_rule="divides",
    bias_scaled=False,
    row_scale_mean=False,
    scales_inverted=False,
    promote_every=None,
    out_via=None,
    vector_scale_ignored=False,
):
    """A float64 ``_scaled_mm`` with one fault: partial sums rounded to ``keep_bits`` mantissa
    bits, ``scale_result`` applied by ``scale_rule``, the bias scaled with the product, rowwise A
    scales replaced by their mean, both scales divided by instead of multiplied, or the output
    rounded through ``out_via`` (say bfloat16) before ``out_dtype``, or a one-element 1-D
    tensorwise scale read as 1 (``vector_scale_ignored``). Used by
    tests/cpu/tools/test_gemm_probes.py and tests/meta to show the probes and checks catch each.

    ``keep_bits`` with ``promote_every`` is no fault but another GPU generation: Hopper's tensor
    cores keep about 13 bits within a K block, and with ``use_fast_accum=False`` the partial sum is
    promoted (here to float64) every ``promote_every`` products; with fast accumulation, never."""

    def mm(A, B, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
        a, b = A.double(), B.double()
        # the scale forms torch's kernels take (one element each, or (M, 1) and (1, N)); any other
        # is declined as torch declines it, from inside torch
        rowwise = scale_a.shape == (a.shape[0], 1) and scale_b.shape == (1, b.shape[1])
        torch._check_value(scale_a.numel() == scale_b.numel() == 1 or rowwise, lambda: "Invalid scaling configuration.")
        if vector_scale_ignored and scale_a.shape == (1,):
            scale_a = torch.ones((), dtype=scale_a.dtype)
        sa = scale_a.double().mean() if row_scale_mean else scale_a.double()
        sb = scale_b.double()
        if scales_inverted:
            sa, sb = 1 / sa, 1 / sb
        if keep_bits is None:
            out = a @ b
        else:
            out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
            part = torch.zeros_like(out)
            for k in range(a.shape[1]):
                part = part + a[:, k : k + 1] * b[k : k + 1, :]
                m, e = torch.frexp(part)
                part = torch.ldexp(torch.round(m * 2.0 ** (keep_bits + 1)) / 2.0 ** (keep_bits + 1), e)
                if promote_every and not use_fast_accum and (k + 1) % promote_every == 0:
                    out, part = out + part, torch.zeros_like(part)
            out = out + part
        out = out * sa * sb
        if bias is not None:
            out = out + bias.double() * (sa * sb if bias_scaled else 1)
        if scale_result is not None and scale_rule != "ignored":
            out = out / scale_result.double() if scale_rule == "divides" else out * scale_result.double()
        if out_via is not None:
            out = out.to(out_via)
        return out.to(out_dtype)

    return mm


# --- the checks: plain functions, called by the thin tests of tests/cpu/install/test_scaled_mm.py
# on each device. Each returns None (or (None, observation)) when the device's
# _scaled_mm conforms, else a line that says what differs. ---

SCALINGS = ["tensorwise", "rowwise"]
OUT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def refusal(scaling: str, out_dtype: torch.dtype, device: str) -> tuple[str | None, str]:
    """``(refusal or None, what)`` for the ``skip_if_refused`` fixture: whether the install runs this
    scaling to this out dtype on the device."""
    return probes.scaled_mm_refusal(
        scaling, out_dtype, device
    ), f"{scaling} torch._scaled_mm to {out_dtype} on {device}"


def shape(device: str) -> tuple[int, int, int]:
    return (64, 128, 48) if device == "cpu" else (512, 1024, 768)


def check_every_out_dtype(device: str, scaling: str, out_dtype: torch.dtype, fast_accum: bool) -> str | None:
    """Guards: an out dtype whose epilogue rounds or converts wrongly (a float32 output that went
    through bfloat16); rowwise scales applied to the wrong axis (rows and columns here have
    different scales, up to 2^6 apart). The operands' partial sums are exact in any accumulator,
    so the bound is the output's own rounding on every GPU generation, fast accumulation or not."""
    c = case(*shape(device), scaling, device, exact_sums=True)
    problem = excess(c, run(c, out_dtype, fast_accum=fast_accum), out_dtype)
    return problem and f"{scaling} -> {out_dtype}, fast_accum={fast_accum} on {device}: {problem}"


def check_bias_added_once(device: str, scaling: str) -> str | None:
    """Guards: a bias scaled together with the product (by scale_a * scale_b), or added twice.
    The scales here are far from 1, so either would be far outside the bound."""
    c = case(*shape(device), scaling, device, seed=1, exact_sums=True)
    gen = torch.Generator().manual_seed(2)
    bias = (torch.randn(c.vb.shape[1], generator=gen) * 8).to(torch.bfloat16)
    out = run(c, torch.bfloat16, bias=bias.to(device))
    problem = excess(c, out, torch.bfloat16, bias=bias)
    return problem and f"{scaling} with bias on {device}: {problem}"


def check_ragged_rows(device: str, scaling: str, rows: tuple[int, ...]) -> tuple[str | None, str]:
    """Guards: the M tail of a kernel tiled in M (an illegal memory access once lived in CUDA
    rowwise scaled_mm with M not a multiple of 256; torch asks only K and N to be multiples of
    16, so M = 1, 17, 100, 4111 are all legal). It was written for CUTLASS's rowwise kernel; which
    kernel each M ran is the observation (cuBLASLt's outer-vector scaling, on torch 2.11 with
    cuBLASLt >= 12.9, is another backend)."""
    _, k, n = shape(device)
    seen: dict[str, list[int]] = {}
    for m in rows:
        c = case(m, k, n, scaling, device, seed=m, exact_sums=True)
        problem = excess(c, run(c, torch.bfloat16), torch.bfloat16)
        seen.setdefault(kernels_of(functools.partial(run, c, torch.bfloat16), device), []).append(m)
        if problem:
            return f"{scaling}, M={m} on {device}: {problem}", ""
    return None, "; ".join(f"M={','.join(map(str, ms))}: {kernels}" for kernels, ms in seen.items())


def check_compiled(device: str, scaling: str) -> tuple[str | None, str]:
    """Guards: inductor's scaled-mm lowering picking another scaling than eager. Two compiled
    paths, each held to the exact-sum bound: the default one (which keeps the ATen call, so it
    runs eager's kernel) and max-autotune with only Triton templates (``MAX_AUTOTUNE_TRITON``: a
    kernel of inductor's own, where this install has one; a refusal is recorded). Observed: the
    kernels each ran (``gemm_probes.kernels_of``) and whether the output is eager's, bitwise.
    Compile under the ``fresh_dynamo`` fixture."""
    c = case(*shape(device), scaling, device, seed=3, exact_sums=True)
    eager = run(c, torch.bfloat16)
    words = [f"eager: {kernels_of(lambda: run(c, torch.bfloat16), device)}"]
    problems = []
    hows: tuple[tuple[str, bool | dict], ...] = (("compiled", True), ("max-autotune Triton", MAX_AUTOTUNE_TRITON))
    for label, how in hows:
        torch._dynamo.reset()  # (a compile of its own, not the previous one's cache)
        fn = scaled_mm_fn(torch.bfloat16, compiled=how)

        def compiled_run(fn: Callable[[Case, torch.Tensor | None], torch.Tensor] = fn) -> torch.Tensor:
            return fn(c, None)

        # (the default compile runs unguarded: eager's kernel must compile; inductor's own Triton
        # templates may be absent on a device, which refusals.DOCUMENTED_LIMITS names, and nothing else)
        ok, out = attempt(compiled_run, device) if how is not True else (True, compiled_run())  # compiles
        if not ok or not isinstance(out, torch.Tensor):
            words.append(f"{label}: {out}")
            continue
        same = "bitwise equal to eager" if torch.equal(out, eager) else "differs from eager"
        kernels = kernels_of(compiled_run, device)  # what it compiled, run again (not its compilation)
        words.append(f"{label}: {kernels} ({same})")
        problem = excess(c, out, torch.bfloat16)
        if problem:
            problems.append(f"{label} {scaling} on {device}: {problem}")
    return ("; ".join(problems) or None), "; ".join(words)


def check_scale_result(device: str, out_dtype: torch.dtype) -> tuple[str | None, str]:
    """Guards: ``scale_result`` silently ignored for an FP8 output (E4M3 x E4M3 -> E4M3, and
    E4M3 x E5M2 -> E5M2: cuBLAS has no E4M3 x E4M3 -> E5M2 kernel). Which way it applies is
    implementation-defined (pinned in the profile as scaled_mm.scale_result, and the observation
    here); that it applies, and to the right value, is checked: decode(out) is the exact result
    under that rule, within half an FP8 ulp plus float32 accumulation, and half the smallest
    subnormal near zero."""
    rule = scale_result_rule(device, out_dtype)
    if rule not in ("divides", "multiplies"):
        return f"scale_result with {out_dtype} output on {device}: {rule}", rule
    # small-integer operands: every partial sum exact in any accumulator, so the tolerance is the
    # FP8 output's rounding and nothing a narrower accumulator could hide in
    c = case(32, 64, 32, "tensorwise", device, seed=4, b_dtype=operand_dtypes(out_dtype)[1], exact_sums=True)
    ref, bound = reference_bound(c.va, c.vb, c.scale_a, c.scale_b, torch.float32, accum_bits=None)
    t = 2.0 ** float(torch.ceil(torch.log2(ref.abs().max() / 100)))  # the result / t stays below 448
    s = t if rule == "divides" else 1 / t
    out = torch._scaled_mm(
        c.A,
        c.B,
        scale_a=c.scale_a,
        scale_b=c.scale_b,
        out_dtype=out_dtype,
        scale_result=torch.tensor(s, device=device),
    )
    want, tol = (
        ref / t,
        bound / t
        + torch.finfo(out_dtype).eps / 2 * (ref / t).abs()
        + torch.finfo(out_dtype).smallest_normal * torch.finfo(out_dtype).eps / 2,
    )
    err = (out.double().cpu() - want).abs()
    if bool((err <= tol).all()):
        return None, rule
    return f"max excess {(err - tol).max().item():.3e} ({out_dtype}, rule {rule})", rule


def check_promotion(device: str) -> tuple[str | None, str]:
    """Guards: a kernel that stops promoting its partial sums to float32 while use_fast_accum=False
    promises it (calc_diff < 1e-3 cannot see 14 bits against 23). Checked: only what cuBLAS
    promises, two products PROMOTION_K (1024) apart summed in float32. Observed and pinned in the
    profile (scaled_mm.accum_bits.*, scaled_mm.promotion_interval.*): the width within one K
    block (about 13-14 bits on Hopper whatever use_fast_accum says), across blocks with fast
    accumulation (no promotion), and how far apart products must be to be promoted."""
    bits = {
        (span, fast): accumulator_bits(device, fast, span) for span in ("within", "across") for fast in (False, True)
    }
    seen = (
        f"within a K block: exact {bits['within', False]}, fast {bits['within', True]}; "
        f"across K blocks ({PROMOTION_K} apart): exact {bits['across', False]}, fast {bits['across', True]}; "
        f"promoted every: exact {promotion_interval(device, False)}, fast {promotion_interval(device, True)}"
    )
    if bits["across", False] != 23:
        return f"use_fast_accum=False kept {bits['across', False]} bits across K blocks", seen
    if not all(0 <= b <= 23 for b in bits.values()):
        return f"accumulator widths out of range: {bits}", seen
    return None, seen


def check_scale_forms(device: str) -> tuple[str | None, str]:
    """Guards: a scale form the kernel accepts but reads wrongly (a one-element 1-D scale taken as
    1, a rowwise scale applied along the other axis), and M, K or N not a multiple of 16 taken but
    mishandled. Which forms and shapes a device takes is pinned (``scaled_mm.form.*``)."""
    forms = scale_forms_and_shapes(device)
    seen = ", ".join(f"{k}: {v if v in ('ok',) or v.startswith('wrong') else 'refused'}" for k, v in forms.items())
    wrong = {k: v for k, v in forms.items() if v.startswith("wrong")}
    if wrong:
        return f"accepted but wrong on {device}: {wrong}", seen
    if forms["tensorwise.0d"] != "ok":
        return f"a 0-d tensorwise scale: {forms['tensorwise.0d']}", seen
    return None, seen
