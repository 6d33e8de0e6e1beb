"""MX scale modes and block sizes: an EVEN that does not round amax, a CEIL that also bumps exact
powers of two, an RCEIL that is FLOOR, a block size that is always 32, each through
``check_mx_mode`` on the boundary blocks, in the mode and block size the fault lives in."""

import pytest
import torch

from fp8ref.harness.ao.mx_modes import as_held, check_mx_mode
from fp8ref.reference.formats import E2M1FN, E4M3FN, FloatFormat
from fp8ref.reference.quantize import quantize, quantize_with_scale
from fp8ref.reference.scaling import amax, mx


def right(x, fmt, block_size, mode):
    q = quantize(x, fmt, mx(block_size, mode))
    return q.scale_e8m0, as_held(q.codes, fmt)


def _with_exponent(x, fmt, block_size, e):
    g = mx(block_size)
    q = quantize_with_scale(x, torch.exp2(-e), fmt, g)
    return (e + 127).to(torch.uint8), as_held(q.codes, fmt)


def ceil_bumps_powers_of_two(x, fmt, block_size, mode):
    e = torch.floor(torch.log2(amax(x, mx(block_size)).double())).float() + 1 - fmt.emax
    return _with_exponent(x, fmt, block_size, e)


FAULTS = {
    "EVEN without rounding amax": (lambda x, fmt, b, mode: right(x, fmt, b, "floor"), "even", 32),
    "CEIL bumps exact powers of two": (ceil_bumps_powers_of_two, "ceil", 32),
    "RCEIL is FLOOR": (lambda x, fmt, b, mode: right(x, fmt, b, "floor"), "rceil", 32),
    "block size always 32": (lambda x, fmt, b, mode: right(x, fmt, 32, mode), "floor", 64),
}


@pytest.mark.parametrize("fmt", [E4M3FN, E2M1FN], ids=str)
def test_the_reference_passes_its_own_check(fmt):
    for mode in ("floor", "rceil", "ceil", "even"):
        for block_size in (1, 32, 24):
            r = check_mx_mode(right, fmt, mode, block_size)
            assert r.problem is None and r.refused is None and not r.deviations, r


def mx_mode_fault_caught(fault: str, fmt: FloatFormat = E4M3FN) -> bool:
    to_mx, mode, block_size = FAULTS[fault]
    return check_mx_mode(to_mx, fmt, mode, block_size).problem is not None


@pytest.mark.parametrize("fmt", [E4M3FN, E2M1FN], ids=str)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_mx_mode_fault_is_caught(fault, fmt):
    assert mx_mode_fault_caught(fault, fmt), f"check_mx_mode did not notice {fault} ({fmt})"
