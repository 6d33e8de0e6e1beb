"""float8 -> float8 conversions and copies into float8: a conversion that truncates, one that
reads FNUZ's NaN code as negative zero, one that saturates only positive overflow, a copy_ that
loses the sign of zero; each through the same checks tests/cpu/install/test_float8_to_float8.py
holds torch to."""

from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import all_16bit_inputs
from fp8ref.harness.casts.conformance import check_cast
from fp8ref.harness.casts.float8_conversions import check_float8_to_float8, float8_codes
from fp8ref.harness.casts.implementations import Implementation
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E4M3FNUZ, E5M2, FloatFormat


def _from_codes(
    src: FloatFormat, dst: FloatFormat, rounding: str = "rne", saturate: bool = False
) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda codes: encode(decode(codes, src).float(), dst, saturate=saturate, rounding=rounding)


def _fnuz_nan_as_negative_zero(codes: torch.Tensor) -> torch.Tensor:
    out = _from_codes(E4M3FNUZ, E4M3FN)(codes)
    return torch.where(codes == 0x80, torch.full_like(out, 0x80), out)


def _saturates_positive_only(codes: torch.Tensor) -> torch.Tensor:
    sat, non = _from_codes(E5M2, E4M3FN, saturate=True)(codes), _from_codes(E5M2, E4M3FN)(codes)
    return torch.where(decode(codes, E5M2) > 0, sat, non)


# name -> (source, target, conversion of source codes)
CONVERSION_FAULTS = {
    "rounded toward zero": (E4M3FN, E5M2, _from_codes(E4M3FN, E5M2, rounding="rtz")),
    "FNUZ NaN read as -0": (E4M3FNUZ, E4M3FN, _fnuz_nan_as_negative_zero),
    "only positive overflow saturates": (E5M2, E4M3FN, _saturates_positive_only),
}


def _copy_losing_negative_zero(x: torch.Tensor) -> torch.Tensor:
    codes = encode(x, E4M3FN, saturate=True)
    return torch.where(codes == 0x80, torch.zeros_like(codes), codes)


def test_the_codec_passes_as_a_conversion():
    for src, dst in ((E4M3FN, E5M2), (E4M3FNUZ, E4M3FN), (E5M2, E4M3FN)):
        impl = Implementation("codec", "-", _from_codes(src, dst))
        assert check_float8_to_float8(src, dst, impl=impl).ok


def conversion_fault_caught(fault: str) -> bool:
    if fault == "copy_ loses -0.0":
        impl = Implementation("broken copy_", "-", _copy_losing_negative_zero)
        return not check_cast(impl, all_16bit_inputs(torch.bfloat16), E4M3FN).ok
    src, dst, fn = CONVERSION_FAULTS[fault]
    assert float8_codes(src)[0].numel() == 256
    return not check_float8_to_float8(src, dst, impl=Implementation(f"broken ({fault})", "-", fn)).ok


FAULTS = [*CONVERSION_FAULTS, "copy_ loses -0.0"]


@pytest.mark.parametrize("fault", FAULTS)
def test_float8_conversion_fault_is_caught(fault):
    assert conversion_fault_caught(fault), f"the float8 conversion checks did not notice: {fault}"
