"""Casts: truncation, ties away from zero, flushed subnormals, lost -0.0, NaN turned into max, a
wrong exponent bias, through ``check_cast`` on every bfloat16 pattern and the 2^32 sweep's one-class
chunks.

Deliberately broken stand-ins run through the same checks the suite holds torch and torchao to;
each must be reported (a fault that passes means a check went blind). ``test_catch_rate.py`` runs
every family again for the catch rate printed at the end of the run."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import all_16bit_inputs
from fp8ref.harness.casts.conformance import check_cast
from fp8ref.harness.casts.implementations import Implementation
from fp8ref.harness.casts.sweep import sweep_float32
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E5M2, E8M0FNU, FloatFormat


# --- casts, through fp8ref.harness.casts.conformance.check_cast on every bfloat16 pattern ---------------------
def _ties_away(x: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    rne = encode(x, fmt, saturate=True)
    low = encode(x, fmt, saturate=True, rounding="rtz")
    lo, hi = decode(low, fmt).abs(), decode(low + 1, fmt).abs()  # the two neighbours of |x|
    tie = (x.float().abs() == (lo + hi) / 2) & (low & 0x7F != fmt.max_code)
    return torch.where(tie, low + 1, rne)  # sign-magnitude codes: +1 is one step away from zero


def _flush_subnormals(x: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    codes = encode(x, fmt, saturate=True)
    sub = (decode(codes, fmt).abs() < fmt.min_normal) & (decode(codes, fmt) != 0)
    return torch.where(sub, codes & 0x80, codes)


def _lose_negative_zero(x: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    codes = encode(x, fmt, saturate=True)
    return torch.where(codes == 0x80, torch.zeros_like(codes), codes)


def _nan_to_max(x: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    codes = encode(x, fmt, saturate=True)
    return torch.where(torch.isnan(x), torch.full_like(codes, fmt.max_code), codes)


def _wrong_bias(x: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
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


def cast_fault_caught(fault: str, fmt: FloatFormat) -> bool:
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
