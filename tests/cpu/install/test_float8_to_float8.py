"""Conversions between float8 dtypes and copies into float8 tensors, against the definition.

Training moves FP8 numbers between formats (an E4M3 weight re-cast to E5M2, an FNUZ checkpoint
loaded into an FN model, E8M0 scales widened) and writes them into preallocated buffers with
``copy_``. Every source code's exact value must come out rounded once into the target, with the
target's NaN and overflow rules; what is implementation-defined (overflow, inf, what an unsigned
target does with zero and negatives) is observed and pinned as ``cast.<dst>.from_<src>`` and
``cast.<dst>.copy_from_<src>`` in the golden profile."""

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import all_16bit_inputs, float32_structured_inputs
from fp8ref.harness.casts.conformance import check_cast, float64_rounding
from fp8ref.harness.casts.float8_conversions import HOWS, check_float8_to_float8, copy_into
from fp8ref.harness.casts.implementations import torch_cast
from fp8ref.harness.stack import probes
from fp8ref.reference.formats import select

PAIRS = [
    pytest.param(s, d, id=f"{s.name}-to-{d.name}")
    for s in select(has_torch_dtype=True)
    for d in select(has_torch_dtype=True)
    if s != d
]
TARGETS = [pytest.param(f, id=f.name) for f in select(has_torch_dtype=True)]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("src,dst", PAIRS)
def test_every_code_converts_to_every_float8_format_by_the_definition(
    src, dst, how, skip_if_refused, record_cast_report
):
    skip_if_refused(probes.torch_dtype_refusal(src), f"holds {src.name}")
    skip_if_refused(probes.torch_dtype_refusal(dst), f"holds {dst.name}")
    report = check_float8_to_float8(src, dst, how)
    record_cast_report(report)
    assert report.ok, report.failure_message()


@pytest.mark.parametrize("source", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("dst", TARGETS)
def test_copy_into_float8_from_every_16bit_pattern(dst, source, skip_if_refused, record_cast_report):
    skip_if_refused(probes.torch_dtype_refusal(dst), f"holds {dst.name}")
    report = check_cast(copy_into(dst), all_16bit_inputs(source), dst, f"copy_ from {source}")
    record_cast_report(report)
    assert report.ok, report.failure_message()


@pytest.mark.parametrize("dst", TARGETS)
def test_copy_into_float8_from_float32_and_float64_rounds_as_the_cast_does(dst, skip_if_refused, record_cast_report):
    """float32: the structured inputs against the codec. float64: rounded once or through float32
    (both are observed in the wild); copy_ must round the way ``.to`` does on this install."""
    skip_if_refused(probes.torch_dtype_refusal(dst), f"holds {dst.name}")
    x = torch.cat(list(float32_structured_inputs(dst).values()))
    report = check_cast(copy_into(dst), x, dst, "copy_ from float32")
    record_cast_report(report)
    assert report.ok, report.failure_message()
    to = torch_cast(dst)
    assert to is not None
    assert float64_rounding(copy_into(dst), dst) == float64_rounding(to, dst), f"{dst.name}: copy_ from float64"
