"""The CUDA twin of tests/cpu/install/test_float8_to_float8.py: every code of each float8 dtype
converted into every other one on the device, by ``.to`` and by ``copy_``, against the definition
(the CUDA conversion kernels are separate code from the CPU ones). The observed overflow and NaN
answers go into the end-of-run cast section."""

import pytest

from fp8ref.harness.casts.float8_conversions import HOWS, check_float8_to_float8
from fp8ref.harness.stack import probes
from fp8ref.reference.formats import select

PAIRS = [
    pytest.param(s, d, id=f"{s.name}-to-{d.name}")
    for s in select(has_torch_dtype=True)
    for d in select(has_torch_dtype=True)
    if s != d
]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("src,dst", PAIRS)
def test_device_converts_every_code_to_every_float8_format(
    src, dst, how, gpu_device, skip_if_refused, record_cast_report
):
    skip_if_refused(probes.torch_dtype_refusal(src), f"holds {src.name}")
    skip_if_refused(probes.torch_dtype_refusal(dst), f"holds {dst.name}")
    report = check_float8_to_float8(src, dst, how, gpu_device)
    record_cast_report(report)
    assert report.ok, report.failure_message()
