"""Each GEMM bound as tight as its derivation: a stand-in whose answer is the exact one but at one
element, where it errs by 1.2 to 1.8 times the bound derived here (from the definition, in this
file), must be caught, and one that errs by 0.2 to 0.8 times it must not. So a bound loosened to
twice its derivation (a wider accumulator assumed, a term counted twice) fails the first, and one
tightened below it the second. Where a bound is a sum of terms, the fault lands where the term
under test is what bounds it: a sum that cancels to 0 exactly, whose bound is the accumulation
term alone (the grouped GEMMs, the MX linear); where no input makes the other terms vanish
(FP8Linear's input quantization), an error of the other terms in full plus 1.2 to 1.8 (0.2 to
0.8) times the accumulation term.

The bounds are those whose accumulator a GPU run once took from a probe of the device under test
(``gemm_probes.accumulator_bits``): the tracer's ``_scaled_mm`` (``trace.op_checks``),
``scaled_mm_quality``'s, the grouped GEMMs' (bfloat16 and MXFP8), transformers' FP8Linear
forward's and the MX linear's (``documented_accumulator.gemm_accumulation``), each on its CPU
branch, where it runs here; and what they assume on a GPU: the documented accumulator, whatever
the device's probe would say.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.ao import mx_kernels
from fp8ref.harness.gemm import documented_accumulator, gemm_probes
from fp8ref.harness.gemm import grouped_bounds as gb
from fp8ref.harness.gemm import scaled_mm_quality as quality
from fp8ref.harness.hf.fp8_layer_forward import check_fp8linear_forward
from fp8ref.harness.stack import probes
from fp8ref.harness.trace import trace
from fp8ref.reference import grouped as ref_grouped
from fp8ref.reference.block_fp8 import BLOCK, expand
from fp8ref.reference.codec import decode
from fp8ref.reference.formats import E4M3FN
from tests.common.kernels import cpu_kernel_replaced as _cpu_kernel

E4M3 = torch.float8_e4m3fn
U32 = 2.0**-24  # one float32 rounding, relative
U_BF16 = 2.0**-8  # one bfloat16 rounding, relative
FAULT, WITHIN = (1.2, 1.8), (0.2, 0.8)  # the injected error, in multiples of the derived bound


def _nudged(exact: torch.Tensor, bound: torch.Tensor, dtype: torch.dtype, span: tuple[float, float]) -> torch.Tensor:
    """``exact`` rounded to ``dtype`` (round to nearest: within any bound here), but for one element,
    which holds a value of ``dtype`` whose error lies strictly inside ``span`` times its bound: the
    first element where one does (a bfloat16 value cannot land everywhere)."""
    lo, hi = span
    out = exact.to(dtype)
    for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.45, 0.55):
        cand = (exact + (lo + t * (hi - lo)) * bound).to(dtype)
        err = (cand.double() - exact).abs()
        fits = ((err > lo * bound) & (err < hi * bound)).reshape(-1).nonzero()
        if len(fits):
            i = int(fits[0])
            out.reshape(-1)[i] = cand.reshape(-1)[i]
            return out
    raise AssertionError(f"no element of {dtype} lands within {span} of its bound")  # (the problem's shape)


# --- the tracer's _scaled_mm, on the CPU --------------------------------------------------------------
def _scaled_mm_bound(va: torch.Tensor, vb: torch.Tensor, sa: float, sb: float, out_dtype: torch.dtype) -> tuple:
    """The exact ``_scaled_mm`` and its bound on the CPU, derived: the operands scaled to float32
    (two roundings), K products summed in float32 (K additions, each at most one float32 rounding
    of the magnitude sum m), the scales' product (one more): (K + 3) 2^-24 m; and the output's own
    rounding, half an ulp of ``out_dtype`` times |exact|."""
    exact = (va @ vb) * sa * sb
    m = (va.abs() @ vb.abs()) * abs(sa * sb)
    return exact, torch.finfo(out_dtype).eps / 2 * exact.abs() + (va.shape[1] + 3) * U32 * m


def _operands() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    a = (torch.randn(16, 64, generator=gen) * 4).to(E4M3)
    b = (torch.randn(64, 16, generator=gen) / 4).to(E4M3)
    return a, b


def _scaled_mm_errs(span: tuple[float, float]) -> Callable[..., torch.Tensor]:
    """A CPU ``_scaled_mm`` (tensorwise) that answers exactly but at one element (``_nudged``)."""

    def mm(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
        out_dtype = out_dtype or a.dtype
        va, vb = _decoded(a), _decoded(b)
        exact, bound = _scaled_mm_bound(va, vb, float(scale_a), float(scale_b), out_dtype)
        return _nudged(exact, bound, out_dtype, span)

    return mm


def _decoded(t: torch.Tensor) -> torch.Tensor:
    """A float8 tensor's values in float64, from fp8ref's codec (no torch kernel a fault replaces)."""
    return decode(t.contiguous().view(torch.uint8), E4M3FN).double().reshape(t.shape)


def _program() -> None:
    a, b = _operands()
    for out_dtype in (torch.float32, torch.bfloat16):
        torch._scaled_mm(a, b.t().contiguous().t(), torch.tensor(1.5), torch.tensor(0.75), out_dtype=out_dtype)


def tracer_caught(span: tuple[float, float]) -> bool:
    """Whether the tracer's ``_scaled_mm`` check flags both calls of ``_program`` on the stand-in."""
    with _cpu_kernel("_scaled_mm", _scaled_mm_errs(span)):
        found = trace(_program)
    judged = [r for r in found.records if r.op == "aten._scaled_mm.default"]
    assert len(judged) == 2 and all(r.kind == "scaled_mm" for r in judged), [r.report() for r in judged]
    return all(r.status == "violation" for r in judged)


def test_the_tracers_scaled_mm_bound_is_its_derivation(skip_if_refused):
    skip_if_refused(probes.scaled_mm_refusal("tensorwise"), "the traced program's _scaled_mm")
    assert tracer_caught(FAULT), "an error of 1.2-1.8 times the derived bound passed the tracer's check"
    with _cpu_kernel("_scaled_mm", _scaled_mm_errs(WITHIN)):
        found = trace(_program)
    assert not found.violations, "\n".join(v.report() for v in found.violations)


# --- scaled_mm_quality's bound, on the CPU ------------------------------------------------------------
def quality_caught(span: tuple[float, float], scaling: str = "rowwise") -> bool:
    """``scaled_mm_quality.bound_problem`` on an answer that errs by ``span`` times the bound
    derived as in ``_scaled_mm_bound`` (the operands' values already include their scales, so the
    scales' roundings are among the K + 3)."""
    c = quality.case(scaling, "gaussian", (32, 128, 32), "cpu")
    exact, bound = _scaled_mm_bound(c.va, c.vb.t(), 1.0, 1.0, torch.float32)
    return quality.bound_problem(c, _nudged(exact, bound, torch.float32, span), "cpu", False) is not None


@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
def test_the_quality_bound_is_its_derivation(scaling):
    assert quality_caught(FAULT, scaling)
    assert not quality_caught(WITHIN, scaling)


# --- documented_accumulator.gemm_accumulation's users, on the CPU -------------------------------------
def _float32_gemm(mag: torch.Tensor, exact: torch.Tensor, k: int) -> torch.Tensor:
    """A bfloat16 output of a float32 GEMM over k products: one bfloat16 rounding of |exact| and
    (k + 1) float32 roundings of the magnitude sum (k additions, the output's conversion)."""
    return U_BF16 * exact.abs() + (k + 1) * U32 * mag


class _Grouped(torch.autograd.Function):
    """A grouped GEMM exact forward and backward (fp8ref's reference), its output nudged."""

    @staticmethod
    def forward(ctx, a, b, offs, span):
        ctx.save_for_backward(a, b, offs)
        exact = ref_grouped.grouped_mm(a, b, offs)
        mag = ref_grouped.grouped_mm(a.abs(), b.abs(), offs)
        return _nudged(exact, _float32_gemm(mag, exact, a.shape[1]), torch.bfloat16, span)

    @staticmethod
    def backward(ctx, grad):
        a, b, offs = ctx.saved_tensors
        da, db = ref_grouped.grouped_mm_backward(a, b, offs, grad)
        return da.to(a.dtype), db.to(b.dtype), None, None


_PROBLEM = gb.problem  # (the check's own, which _cancelling stands in for)


def _cancelling(groups: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """The check's problem, but for token 0 (expert 0) alternating +1 and -1 and expert 0's first
    column all 1: output [0, 0] is a sum that cancels to 0 exactly."""
    a, b, offs, grad = _PROBLEM(groups, seed)
    a[0] = torch.tensor([1.0, -1.0], dtype=a.dtype).repeat(a.shape[1] // 2)
    b[0, :, 0] = 1.0
    return a, b, offs, grad


def grouped_caught(span: tuple[float, float]) -> bool:
    """Output [0, 0] cancels to 0 exactly (``_cancelling``), so its bound is the accumulation term
    alone (no bfloat16 rounding of |exact| to hide a loosened one in): the fault lands there,
    the first element ``_nudged`` tries."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gb, "problem", _cancelling)
        checked = gb.check_grouped_mm("cpu", "ragged", fn=lambda a, b, offs: _Grouped.apply(a, b, offs, span))
    assert checked.refusal is None, checked.refusal
    return checked.problem is not None


class _MXGrouped(torch.autograd.Function):
    """An MXFP8 grouped GEMM (rceil, blocks of 32): the exact products of fp8ref's MX operands of
    each GEMM (fp8ref's reference), the output nudged."""

    @staticmethod
    def forward(ctx, a, b, offs, span):
        ctx.save_for_backward(a, b, offs)
        ma, mb = ref_grouped.mx_operand(a), ref_grouped.mx_operand(b, dim=1)
        exact = ref_grouped.grouped_mm(ma, mb, offs)
        mag = ref_grouped.grouped_mm(ma.abs(), mb.abs(), offs)
        return _nudged(exact, _float32_gemm(mag, exact, a.shape[1]), torch.bfloat16, span)

    @staticmethod
    def backward(ctx, grad):
        a, b, offs = ctx.saved_tensors
        da = ref_grouped.grouped_mm_backward(a, ref_grouped.mx_operand(b, dim=2), offs, ref_grouped.mx_operand(grad))[0]
        a_t, g_t = ref_grouped.mx_tokens_operand(a, offs), ref_grouped.mx_tokens_operand(grad, offs)
        db = ref_grouped.grouped_mm_backward(a_t, b, offs, g_t)[1]
        return da.to(a.dtype), db.to(b.dtype), None, None


def mxfp8_grouped_caught(span: tuple[float, float]) -> bool:
    """As ``grouped_caught``, for the MXFP8 grouped GEMM's check (its operands MX-cast: token 0's
    +-1 and expert 0's column of 1 are E4M3 values, so output [0, 0] still cancels to 0)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gb, "problem", _cancelling)
        checked = gb.check_mxfp8_grouped_mm(
            "cpu", "ragged", pad=False, fn=lambda a, b, offs: _MXGrouped.apply(a, b, offs, span)
        )
    assert checked.refusal is None, checked.refusal
    return checked.problem is not None


def fp8linear_caught(span: tuple[float, float]) -> bool:
    """transformers' FP8Linear forward check on an answer nudged from the exact product of its
    bfloat16 input and the dequantized weight, by ``span`` times the derived bound: quantizing
    each input element to E4M3 in 1 x 128 tiles (half an E4M3 ulp, 2^-4 relative, plus half its
    smallest subnormal, 2^-10, times the tile's amax / 448; x 1.01 for the tile scale's own
    rounding), summed over |w|, and the float32 GEMM's and the bfloat16 output's roundings."""

    def forward(x: torch.Tensor, codes: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
        x64 = x.double()
        w64 = (decode(codes, E4M3FN) * expand(scale_inv, codes.shape, BLOCK)).double()
        exact, mag = x64 @ w64.t(), x64.abs() @ w64.abs().t()
        tile_amax = x64.abs().reshape(x.shape[0], -1, 128).amax(-1).repeat_interleave(128, -1)
        quant = (2.0**-4 * x64.abs() + 2.0**-10 * tile_amax / 448) * 1.01
        bound = quant @ w64.abs().t() + _float32_gemm(mag, exact, x.shape[1])
        return _nudged(exact, bound, torch.bfloat16, span)

    checked = check_fp8linear_forward("cpu", forward_fn=forward)
    return checked.problem is not None


def fp8linear_accumulation_caught(span: tuple[float, float]) -> bool:
    """The FP8Linear forward's accumulation term on its own: quantizing the input to E4M3 (some
    2^-4 of m) outweighs float32's accumulation ((k + 1) 2^-24 m) thousands of times at every
    element, and no input makes it vanish, so an error in multiples of the whole bound cannot
    tell a doubled accumulation term. Here output [0, 0] errs by the other terms in full (the
    input's quantization, the output's bfloat16 rounding, derived as in ``fp8linear_caught``)
    plus ``span`` times the accumulation term, and is given in float64 (bfloat16 cannot hold a
    difference that small)."""

    def forward(x: torch.Tensor, codes: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
        x64 = x.double()
        w64 = (decode(codes, E4M3FN) * expand(scale_inv, codes.shape, BLOCK)).double()
        exact, mag = x64 @ w64.t(), x64.abs() @ w64.abs().t()
        tile_amax = x64.abs().reshape(x.shape[0], -1, 128).amax(-1).repeat_interleave(128, -1)
        quant = (2.0**-4 * x64.abs() + 2.0**-10 * tile_amax / 448) * 1.01
        rest = quant @ w64.abs().t() + U_BF16 * exact.abs()
        accumulation = (x.shape[1] + 1) * U32 * mag
        out = exact.clone()
        out[0, 0] += rest[0, 0] + sum(span) / 2 * accumulation[0, 0]
        return out

    return check_fp8linear_forward("cpu", forward_fn=forward).problem is not None


def mx_linear_caught(span: tuple[float, float]) -> bool:
    """The MX linear check's bound (``mx_kernels._bounded``: the product of the MX-cast operands).
    Output [0, 0] is a sum that cancels to 0 exactly, so its bound is the accumulation term alone
    (no bfloat16 rounding of |exact| to hide a loosened one in): the fault lands there."""
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(24, 128, generator=gen).double(), torch.randn(64, 128, generator=gen).double()
    a[0], b[0] = torch.tensor([1.0, -1.0]).repeat(64), 1.0
    exact, mag = a @ b.t(), a.abs() @ b.abs().t()
    got = _nudged(exact, _float32_gemm(mag, exact, a.shape[1]), torch.bfloat16, span)
    return mx_kernels._bounded(got, a, b, "cpu", "MX linear stand-in") is not None


GEMM_BOUNDS = {
    "grouped GEMM": grouped_caught,
    "MXFP8 grouped GEMM": mxfp8_grouped_caught,
    "FP8Linear forward": fp8linear_caught,
    "FP8Linear forward's accumulation term": fp8linear_accumulation_caught,
    "MX linear": mx_linear_caught,
}


@pytest.mark.parametrize("name", GEMM_BOUNDS)
def test_the_gemm_accumulation_bounds_are_their_derivation(name):
    caught = GEMM_BOUNDS[name]
    assert caught(FAULT), f"{name}: an error of 1.2-1.8 times the derived bound (term) passed"
    assert not caught(WITHIN), f"{name}: an error of 0.2-0.8 times the derived bound (term) was flagged"


# --- on a GPU: the documented accumulator, never the device's probe -----------------------------------
def test_a_gpus_bounds_never_ask_the_device_under_test(monkeypatch):
    """Every GPU bound with its accumulator from the documented hardware behaviour: the least width
    documented within a K block, 13 mantissa bits (DeepSeek-V3 report section 3.3.2, "around 14
    bits" on H800; SageAttention2, an e8m13 accumulator), no promotion with fast accumulation
    (cuBLAS's CUBLASLT_MATMUL_DESC_FAST_ACCUM), promotion within 1024 products without it (what
    check_promotion asserts). The probe answers nothing here: a bound that asked it fails."""

    def asked(*args: object, **kwargs: object) -> int:
        raise AssertionError("a bound asked the device under test for its accumulator")

    monkeypatch.setattr(gemm_probes, "_bits", asked)
    monkeypatch.setattr(gemm_probes, "_ANSWERS", {})  # (no answer cached from an earlier probe)
    narrow = 2.0**-14  # half an ulp at 13 mantissa bits
    k = 4096
    assert documented_accumulator.within_bits("cuda") == 13
    assert documented_accumulator.gemm_accumulation(k, "cuda") == (k - 1) * narrow + 4 * U32
    fast = quality.case("rowwise", "gaussian", (16, k, 16), "cpu")
    assert quality.accumulation(fast, "cuda", True) == (k - 1) * narrow + 4 * U32
    assert quality.accumulation(fast, "cuda", False) == 1023 * narrow + (4 + 3) * U32
    with pytest.raises(AssertionError, match="asked the device"):  # (the stand-in probe is reached)
        gemm_probes.accumulator_bits("cpu", False, "within")


def test_the_documented_accumulator_names_a_bad_argument():
    with pytest.raises(ValueError, match=r"k: expected a positive int, got 0"):
        documented_accumulator.gemm_accumulation(0, "cuda")
    with pytest.raises((TypeError, ValueError), match="fast_accum"):
        documented_accumulator.gpu_accumulator("yes")
