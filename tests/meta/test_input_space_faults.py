"""The input space around a cast: a cast that ignores strides, a strided cast whose overflow
differs from the contiguous one's, a decode that loses -0.0 or flushes
float16 subnormals, a float64 cast that rounds some inputs once and some through float32.

Deliberately broken stand-ins run through the same checks the suite holds torch and torchao to;
each must be reported (a fault that passes means a check went blind). ``test_catch_rate.py`` runs
every family again for the catch rate printed at the end of the run."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import all_16bit_inputs
from fp8ref.harness.casts.conformance import float64_rounding
from fp8ref.harness.casts.implementations import Implementation
from fp8ref.harness.casts.input_space import (
    as_matrix,
    decode_mismatches,
    layout_bit_mismatches,
    layout_mismatches,
)
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E5M2


# --- the input space around a cast, through fp8ref/harness/casts/input_space and float64_rounding --------
def _as_if_contiguous(view: torch.Tensor) -> torch.Tensor:
    """Reads a view's memory as if it were laid out contiguously from its offset (a kernel that
    ignores strides)."""
    strides: list[int] = []
    acc = 1
    for size in reversed(view.shape):
        strides.insert(0, acc)
        acc *= size
    return view.as_strided(view.shape, strides, view.storage_offset())


def _strided_path_does_not_saturate(v: torch.Tensor) -> torch.Tensor:
    """A contiguous kernel that saturates overflow beside a strided fallback that does not: every
    in-range input still casts like the codec."""
    return encode(v.contiguous(), E4M3FN, saturate=v.is_contiguous())


INPUT_SPACE_FAULTS = {
    "a strided cast that overflows unlike the contiguous one": lambda: (
        bool(layout_bit_mismatches(_strided_path_does_not_saturate, as_matrix(all_16bit_inputs(torch.bfloat16))))
        and not layout_mismatches(_strided_path_does_not_saturate, torch.randn(64, 96) * 40, E4M3FN)
    ),
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
    x = as_matrix(all_16bit_inputs(torch.bfloat16))
    assert not layout_bit_mismatches(lambda v: encode(v.contiguous(), E4M3FN, saturate=True), x)
    assert not layout_mismatches(lambda v: encode(v.contiguous(), E4M3FN), torch.randn(64, 96) * 40, E4M3FN)
    assert not decode_mismatches(lambda c: decode(c, E4M3FN).half(), E4M3FN, torch.float16)
