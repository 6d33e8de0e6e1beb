"""The CUDA twin of tests/cpu/install/test_mx_modes.py: torchao's ``to_mx`` on the device in every
scale mode and block size, at the amax values that decide each mode (tests/common/mx_checks.py)."""

import pytest

from fp8ref.harness import torchao_compat as ao
from fp8ref.reference.formats import select
from tests.common.mx_checks import BLOCK_SIZES, MODES, check_mx_mode

pytestmark = pytest.mark.needs("torchao")

MX_FORMATS = [pytest.param(f, id=f.name) for f in select(mx_element=True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_device_mx_scales_like_the_definition_of_each_mode(fmt, mode, gpu_device, record_observation):
    def to_mx(x, f, block_size, m):
        scale, data = ao.to_mx(x.to(gpu_device), f, block_size, m)
        return scale.cpu(), data.cpu()

    results = {b: check_mx_mode(to_mx, fmt, mode, b) for b in BLOCK_SIZES}
    refused = {b: r.refused for b, r in results.items() if r.refused}
    for b, why in refused.items():
        record_observation(f"torchao mx {fmt.name} {mode} block {b} on {gpu_device}", str(why))
    excused = sum(n for r in results.values() for n in r.deviations.values())
    if excused:
        record_observation(f"torchao mx {fmt.name} {mode} on {gpu_device}: known deviations", f"{excused} blocks")
    problems = [r.problem for r in results.values() if r.problem]
    assert not problems, "\n".join(problems)
