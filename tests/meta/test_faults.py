"""The harness catches faults: deliberately broken implementations run through the same checks
the suite holds torch and torchao to, and each must be reported. A fault that passes means a
check went blind, and fails here.

Faults are the kinds an upgrade could bring: rounding (truncation, ties away from zero),
flushed subnormals, lost -0.0, NaN turned into max, a wrong exponent bias; a missing eps clamp,
a scale one ulp off, power-of-two rounding up, axiswise amax on the wrong dim; E4M3 gradients
where the recipe says E5M2; delayed scaling on the latest amax instead of the window's max; a
_scaled_mm that divides by its scales or accumulates in bfloat16; an FSDP float8 all-gather whose
scale comes from one rank's shard, that is not refreshed after the optimizer step, or that
carries bf16; a cast that ignores strides, a decode that loses -0.0 or flushes float16
subnormals, a float64 cast that rounds some inputs once and some through float32.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fp8ref.harness.cast_inputs import all_16bit_inputs
from fp8ref.harness.conformance import check_cast, float64_rounding
from fp8ref.harness.implementations import Implementation
from fp8ref.harness.sweep import sweep_float32
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.delayed import DelayedScaling
from fp8ref.reference.formats import E4M3FN, E5M2, E8M0FNU
from fp8ref.reference.recipes import RECIPES
from fp8ref.reference.scaling import EPS, amax, axiswise, compute_scale, round_down_to_pow2, tensorwise
from tests.common import fsdp_checks, scaled_mm_checks
from tests.common.conformance_checks import (
    decode_mismatches,
    delayed_mismatch,
    gemm_operand_mismatches,
    layout_mismatches,
    recipe_table_diffs,
    scale_inputs,
    scale_mismatch,
)


# --- casts, through fp8ref.harness.conformance.check_cast on every bfloat16 pattern ---------------------
def _ties_away(x: torch.Tensor, fmt) -> torch.Tensor:
    rne = encode(x, fmt, saturate=True)
    low = encode(x, fmt, saturate=True, rounding="rtz")
    lo, hi = decode(low, fmt).abs(), decode(low + 1, fmt).abs()  # the two neighbours of |x|
    tie = (x.float().abs() == (lo + hi) / 2) & (low & 0x7F != fmt.max_code)
    return torch.where(tie, low + 1, rne)  # sign-magnitude codes: +1 is one step away from zero


def _flush_subnormals(x: torch.Tensor, fmt) -> torch.Tensor:
    codes = encode(x, fmt, saturate=True)
    sub = (decode(codes, fmt).abs() < fmt.min_normal) & (decode(codes, fmt) != 0)
    return torch.where(sub, codes & 0x80, codes)


def _lose_negative_zero(x: torch.Tensor, fmt) -> torch.Tensor:
    codes = encode(x, fmt, saturate=True)
    return torch.where(codes == 0x80, torch.zeros_like(codes), codes)


def _nan_to_max(x: torch.Tensor, fmt) -> torch.Tensor:
    codes = encode(x, fmt, saturate=True)
    return torch.where(torch.isnan(x), torch.full_like(codes, fmt.max_code), codes)


def _wrong_bias(x: torch.Tensor, fmt) -> torch.Tensor:
    return encode(x, dataclasses.replace(fmt, bias=fmt.bias + 1, name=f"{fmt.name}-bias+1"), saturate=True)


CAST_FAULTS = {
    "truncation": lambda x, fmt: encode(x, fmt, saturate=True, rounding="rtz"),
    "ties away from zero": _ties_away,
    "flushed subnormals": _flush_subnormals,
    "-0.0 lost": _lose_negative_zero,
    "NaN -> max": _nan_to_max,
    "exponent bias + 1": _wrong_bias,
}


def test_a_correct_saturating_cast_passes():
    impl = Implementation("codec-saturating", "-", lambda x: encode(x, E4M3FN, saturate=True))
    assert check_cast(impl, all_16bit_inputs(torch.bfloat16), E4M3FN).ok


def cast_fault_caught(fault: str, fmt) -> bool:
    impl = Implementation(f"broken ({fault})", "-", lambda x: CAST_FAULTS[fault](x, fmt))
    return not check_cast(impl, all_16bit_inputs(torch.bfloat16), fmt, "all bfloat16").ok


@pytest.mark.parametrize("fmt", [E4M3FN, E5M2], ids=str)
@pytest.mark.parametrize("fault", list(CAST_FAULTS))
def test_cast_fault_is_caught(fault, fmt):
    assert cast_fault_caught(fault, fmt), f"check_cast did not notice {fault} ({fmt})"


# the 2^32 sweep's one-class chunks take a shortcut (one codec pass, one comparison): a fault
# there must still fail it, and a correct cast must pass the shortcut
SWEEP_CHUNKS = {
    "in range": (0x3F800000, "truncation"),
    "all NaN": (0x7FC00000, "NaN -> max"),
    "negative in range": (0xBF800000, "ties away from zero"),
}


@pytest.mark.parametrize("chunk", list(SWEEP_CHUNKS))
def test_a_cast_fault_fails_the_sweeps_one_class_chunk(chunk):
    start, fault = SWEEP_CHUNKS[chunk]
    right = Implementation("codec-saturating", "-", lambda x: encode(x, E4M3FN, saturate=True))
    assert sweep_float32(right, E4M3FN, start, 1 << 20).ok
    broken = Implementation(f"broken ({fault})", "-", lambda x: CAST_FAULTS[fault](x, E4M3FN))
    report = sweep_float32(broken, E4M3FN, start, 1 << 20)
    assert not report.ok and f"chunk starting at 0x{start:08x}" in report.failure_message(), chunk


# E8M0 has no sign: a negative chunk's codes must all follow one of the words an implementation
# may choose (NaN, the smallest code, the code of |x|); the shortcut picks the word by the first code
NO_ENCODING_WORDS = {
    "nan": lambda x: torch.full(x.shape, 0xFF, dtype=torch.uint8),
    "min": lambda x: torch.zeros(x.shape, dtype=torch.uint8),
    "abs": lambda x: encode(x.abs(), E8M0FNU),
}


@pytest.mark.parametrize("word", list(NO_ENCODING_WORDS))
def test_the_sweeps_negative_e8m0_chunk_names_the_word_and_catches_a_mixture(word):
    start = 0xBF800000  # -1.0 and the next 2^20 patterns down
    right = Implementation(f"negative->{word}", "-", NO_ENCODING_WORDS[word])
    report = sweep_float32(right, E8M0FNU, start, 1 << 20)
    assert report.ok and report.no_encoding == f"negative->{word}", report.failure_message()

    def mixed(x):  # this word, but the last input answered as another word would
        codes = NO_ENCODING_WORDS[word](x)
        codes[-1] = NO_ENCODING_WORDS["min" if word == "nan" else "nan"](x[-1:])[0]
        return codes

    broken = Implementation(f"negative->{word}, one input otherwise", "-", mixed)
    assert not sweep_float32(broken, E8M0FNU, start, 1 << 20).ok


# --- scales, through tests/common/conformance_checks.scale_mismatch -----------------------------------
def _no_eps_clamp(x, fmt, g, pow2):
    s = (fmt.max / amax(x, g).double()).float()
    return round_down_to_pow2(s) if pow2 else s


def _one_ulp_up(x, fmt, g, pow2):
    return torch.nextafter(compute_scale(x, fmt, g, pow2=pow2), torch.tensor(float("inf")))


def _pow2_rounds_up(x, fmt, g, pow2):
    s = compute_scale(x, fmt, g, pow2=False)
    exact = round_down_to_pow2(s)
    return torch.where(exact == s, s, exact * 2) if pow2 else s


def _axiswise_wrong_dim(x, fmt, g, pow2):
    wrong = axiswise(0 if g.dim in (-1, x.dim() - 1) else -1)
    a = amax(x, wrong).amax().expand(amax(x, g).shape)  # one scale for every slice of the asked dim
    s = (fmt.max / a.double().clamp(min=EPS)).float()
    return round_down_to_pow2(s) if pow2 else s


SCALE_FAULTS = {
    "missing eps clamp": (_no_eps_clamp, axiswise(-1), False),
    "scale one ulp high": (_one_ulp_up, tensorwise(), False),
    "pow2 rounds up": (_pow2_rounds_up, axiswise(-1), True),
    "axiswise amax on the wrong dim": (_axiswise_wrong_dim, axiswise(-1), False),
}


def scale_fault_caught(fault: str) -> bool:
    fn, g, pow2 = SCALE_FAULTS[fault]
    return scale_mismatch(fn, scale_inputs(torch.float32), E4M3FN, g, pow2) is not None


@pytest.mark.parametrize("fault", list(SCALE_FAULTS))
def test_scale_fault_is_caught(fault):
    _, g, pow2 = SCALE_FAULTS[fault]
    assert (
        scale_mismatch(
            lambda x, f, gg, p: compute_scale(x, f, gg, pow2=p), scale_inputs(torch.float32), E4M3FN, g, pow2
        )
        is None
    )  # the check passes the reference itself
    assert scale_fault_caught(fault), f"scale_mismatch did not notice {fault}"


# --- the recipe table, through recipe_table_diffs -----------------------------------------------
def _e4m3_gradients(name):
    table = RECIPES[name].describe()
    return {k: v.replace("e5m2", "e4m3fn") if isinstance(v, str) else v for k, v in table.items()}


def recipe_fault_caught() -> bool:
    return any("grad_input.a" in d for d in recipe_table_diffs(_e4m3_gradients, ("tensorwise",)))


def test_e4m3_gradients_in_the_recipe_table_are_caught():
    assert recipe_table_diffs(lambda n: RECIPES[n].describe(), ("tensorwise",)) == []
    assert recipe_fault_caught()


# --- delayed scaling, through delayed_mismatch --------------------------------------------------
class LatestAmaxDelayedScaling(DelayedScaling):
    """Asked for the window's max, uses the latest amax."""

    def reduced_amax(self):
        return self.amax_history[0]


AMAXES = [1.0, 3.0, 250.0, 2.0, 2.5, 1.5]


def delayed_fault_caught() -> bool:
    return delayed_mismatch(lambda: LatestAmaxDelayedScaling(E4M3FN, 4, "max"), AMAXES, E4M3FN, 4, "max") is not None


def test_delayed_scaling_on_the_latest_amax_is_caught():
    assert delayed_mismatch(lambda: DelayedScaling(E4M3FN, 4, "max"), AMAXES, E4M3FN, 4, "max") is None
    assert delayed_fault_caught()


# --- _scaled_mm, through tests/common/scaled_mm_checks.excess -------------------------------------------
# faults of tests/common/scaled_mm_checks.stand_in: bfloat16 keeps 7 mantissa bits of its partial sums
MM_FAULTS = {"divides by its scales": {"scales_inverted": True}, "accumulates in bfloat16": {"keep_bits": 7}}


def scaled_mm_excess(fault: str | None) -> str | None:
    c = scaled_mm_checks.case(32, 64, 48, "rowwise", "cpu")
    real = torch._scaled_mm
    torch._scaled_mm = scaled_mm_checks.stand_in(**({} if fault is None else MM_FAULTS[fault]))
    try:
        return scaled_mm_checks.excess(c, scaled_mm_checks.run(c, torch.float32), torch.float32)
    finally:
        torch._scaled_mm = real


@pytest.mark.parametrize("fault", list(MM_FAULTS))
def test_scaled_mm_fault_is_caught(fault):
    assert scaled_mm_excess(None) is None
    assert scaled_mm_excess(fault) is not None


# --- FSDP2 float8 all-gather, through tests/common/fsdp_checks ------------------------------------------
# A sharded run as tests/scripts/fsdp_float8.py records it, built here from two steps of weights,
# with each fault as torchao's FSDP float8 path once had one.
FSDP_FAULTS = ("scale from the rank's shard", "stale all-gather after the optimizer step", "bf16 on the wire")


def _fsdp_run(fault: str | None) -> tuple[dict, list]:
    gen = torch.Generator().manual_seed(0)
    steps = [[torch.randn(8, 4, generator=gen) * (s + 1), torch.randn(2, 8, generator=gen)] for s in range(2)]
    gathers, scales = [], []
    for s, weights in enumerate(steps):
        for w in (weights[0], weights[1], weights[1], weights[0]):  # forward, then backward
            source = steps[0][0 if w.shape[0] == 8 else 1] if fault == FSDP_FAULTS[1] and s == 1 else w
            codes, scale = fsdp_checks.reference_cast(source)
            if fault == FSDP_FAULTS[0]:  # the amax of rank 0's half of the rows only
                codes, scale = fsdp_checks.reference_cast(source[: source.shape[0] // 2])
                codes = torch.cat([codes, codes])  # (each rank casts its shard with its own scale)
            if fault == FSDP_FAULTS[2]:
                codes = source.to(torch.bfloat16).view(torch.uint8).reshape(source.shape[0], -1)
            gathers.append({"codes": codes, "scale": scale, "reused_buffer": s == 1, "dtype": "torch.float8_e4m3fn"})
        shard_scales = [
            fsdp_checks.reference_cast(w[: w.shape[0] // 2] if fault == FSDP_FAULTS[0] else w)[1] for w in weights
        ]
        scales.append(shard_scales)
    return {"all_gathers": gathers, "precomputed_scales": scales[1:] + [scales[1]]}, steps


def fsdp_fault_caught(fault: str | None) -> bool:
    run, steps = _fsdp_run(fault)
    return bool(fsdp_checks.all_gather_differences(run, steps))


@pytest.mark.parametrize("fault", FSDP_FAULTS)
def test_fsdp_float8_all_gather_fault_is_caught(fault):
    assert not fsdp_fault_caught(None)
    assert fsdp_fault_caught(fault)


def test_a_precomputed_scale_from_a_shard_is_caught():
    run, steps = _fsdp_run(None)
    assert not fsdp_checks.precomputed_scale_differences(run, [steps[1], steps[1]])
    broken, _ = _fsdp_run(FSDP_FAULTS[0])
    assert fsdp_checks.precomputed_scale_differences(broken, [steps[1], steps[1]])


# --- the input space around a cast, through tests/common/conformance_checks and float64_rounding --------
def _as_if_contiguous(view: torch.Tensor) -> torch.Tensor:
    """Reads a view's memory as if it were laid out contiguously from its offset (a kernel that
    ignores strides)."""
    strides, acc = [], 1
    for size in reversed(view.shape):
        strides.insert(0, acc)
        acc *= size
    return view.as_strided(view.shape, strides, view.storage_offset())


INPUT_SPACE_FAULTS = {
    "a cast that ignores strides": lambda: bool(
        layout_mismatches(lambda v: encode(_as_if_contiguous(v), E4M3FN), torch.randn(64, 96) * 40, E4M3FN)
    ),
    "a decode that loses -0.0": lambda: bool(
        decode_mismatches(lambda c: decode(c, E4M3FN).half() + 0.0, E4M3FN, torch.float16)
    ),
    "a float16 decode that flushes subnormals": lambda: bool(
        decode_mismatches(
            lambda c: (lambda v: torch.where(v.abs() < 2.0**-14, torch.zeros_like(v), v))(decode(c, E5M2).half()),
            E5M2,
            torch.float16,
        )
    ),
    "a float64 cast that rounds some inputs once, some through float32": lambda: float64_rounding(
        Implementation(
            "mixed",
            "0",
            lambda x: torch.where(
                torch.arange(x.numel()) % 2 == 0,
                encode(x.float(), E4M3FN),
                encode((x + (x - x.float().double()) * 2**20).float(), E4M3FN),
            ),
        ),
        E4M3FN,
    ).startswith("other"),
}


@pytest.mark.parametrize("fault", list(INPUT_SPACE_FAULTS))
def test_input_space_fault_is_caught(fault):
    assert INPUT_SPACE_FAULTS[fault]()


def test_the_input_space_checks_pass_the_real_thing():
    assert not layout_mismatches(lambda v: encode(v.contiguous(), E4M3FN), torch.randn(64, 96) * 40, E4M3FN)
    assert not decode_mismatches(lambda c: decode(c, E4M3FN).half(), E4M3FN, torch.float16)


# --- Float8Linear's GEMMs one by one, through tests/common/conformance_checks.gemm_operand_mismatches ------
@pytest.mark.needs("torchao")
@pytest.mark.parametrize("gemm", ["output", "grad_input", "grad_weight"])
def test_a_gemm_whose_operand_cast_changed_is_caught_alone(gemm):
    """torchao's real operands held to a recipe whose one GEMM's A operand changed format (what a
    changed call site in torchao would look like from the other side): that GEMM alone fails."""
    from fp8ref.harness import probes
    from fp8ref.harness import torchao_compat as ao

    gen = torch.Generator().manual_seed(3)
    x, w = (torch.randn(32, 64, generator=gen) * 3).bfloat16(), (torch.randn(48, 64, generator=gen) / 4).bfloat16()
    grad = (torch.randn(32, 48, generator=gen) * 1e-3).bfloat16()
    with ao.float8_gemm_operands() as seen:
        probes.run_torchao_linear("tensorwise", x, w, grad, emulate=True)
    recipe = RECIPES["tensorwise"]
    assert not gemm_operand_mismatches(recipe, seen, x, w, grad)
    old = getattr(recipe, gemm)
    flipped = dataclasses.replace(old.a, fmt=E5M2 if old.a.fmt == E4M3FN else E4M3FN)
    broken = dataclasses.replace(recipe, **{gemm: dataclasses.replace(old, a=flipped)})
    bad = gemm_operand_mismatches(broken, seen, x, w, grad)
    assert bad and all(line.startswith(gemm) for line in bad), bad


# --- MX layouts and scales as linear layers use them ----------------------------------------------
def _misplaced_tile_layout(scales: torch.Tensor) -> torch.Tensor:
    """cuBLAS's block-scale layout with the two in-tile row indices swapped (r // 32 and r % 32)."""
    rows, cols = scales.shape
    pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
    padded = torch.zeros(pr, pc, dtype=scales.dtype)
    padded[:rows, :cols] = scales
    r, c = torch.arange(pr).view(-1, 1), torch.arange(pc).view(1, -1)
    tile = (r // 128) * (pc // 4) + c // 4
    inner = (r % 128 // 32) * 128 + (r % 32) * 4 + c % 4
    out = torch.empty(pr * pc, dtype=scales.dtype)
    out[(tile * 512 + inner).reshape(-1)] = padded.reshape(-1)
    return out


@pytest.mark.needs("torchao")
def test_a_misplaced_swizzle_tile_is_caught():
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    from fp8ref.harness import fp4_gemm
    from fp8ref.reference.quantize import quantize
    from fp8ref.reference.scaling import mx

    x = (torch.randn(256, 512, generator=torch.Generator().manual_seed(0)) * 3).bfloat16()
    plain = quantize(x, E4M3FN, mx(32)).scale_e8m0.reshape(256, 16)
    theirs = MXTensor.to_mx(x, torch.float8_e4m3fn, 32, is_swizzled_scales=True).scale.view(torch.uint8).reshape(-1)
    assert torch.equal(theirs, fp4_gemm.to_blocked(plain))
    assert not torch.equal(theirs, _misplaced_tile_layout(plain))


@pytest.mark.needs("torchao")
def test_an_mx_amax_taken_through_bfloat16_is_caught():
    """The boundary blocks tell a float32 amax from one rounded through bfloat16 first."""
    from fp8ref.harness import torchao_compat as ao
    from fp8ref.reference.quantize import quantize
    from fp8ref.reference.scaling import mx

    edges = torch.nextafter(torch.exp2(torch.arange(-8.0, 9.0)), torch.zeros(17))  # just below 2^k
    x = torch.full((17, 32), 0.25) * edges[:, None]
    x[:, 3] = edges
    right = ao.to_mx(x, E4M3FN, 32, "floor")[0].reshape(-1)
    assert torch.equal(right, quantize(x, E4M3FN, mx(32)).scale_e8m0.reshape(-1))
    through_bf16 = quantize(x.bfloat16(), E4M3FN, mx(32)).scale_e8m0.reshape(-1)
    assert not torch.equal(right, through_bf16)


def test_the_catch_rate_over_every_injected_fault(record_observation):
    """Every fault above again, in one place (no state shared between tests, so any order works):
    the catch rate goes into the end-of-run summary."""
    results = {f"cast {fmt.name}: {f}": cast_fault_caught(f, fmt) for fmt in (E4M3FN, E5M2) for f in CAST_FAULTS}
    results |= {f"scale: {f}": scale_fault_caught(f) for f in SCALE_FAULTS}
    results["recipe: E4M3 gradients"] = recipe_fault_caught()
    results["delayed: latest amax instead of the window max"] = delayed_fault_caught()
    results |= {f"_scaled_mm: {f}": scaled_mm_excess(f) is not None for f in MM_FAULTS}
    results |= {f"FSDP float8 all-gather: {f}": fsdp_fault_caught(f) for f in FSDP_FAULTS}
    results |= {f"input space: {f}": check() for f, check in INPUT_SPACE_FAULTS.items()}
    caught = sum(results.values())
    record_observation("tests/meta: injected faults caught", f"{caught} of {len(results)}")
    assert caught == len(results), [k for k, v in results.items() if not v]
