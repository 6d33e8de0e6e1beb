"""The CUDA twin of tests/cpu/install/test_mx_modes.py: torchao's ``to_mx`` on the device in every
scale mode and block size, at the amax values that decide each mode (fp8ref/harness/ao/mx_modes.py)."""

import pytest

from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.harness.ao.mx_modes import MODES, every_block_size_problem
from fp8ref.reference.formats import select

pytestmark = pytest.mark.needs("torchao")

MX_FORMATS = [pytest.param(f, id=f.name) for f in select(mx_element=True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_device_mx_scales_like_the_definition_of_each_mode(fmt, mode, gpu_device, record_observation):
    def to_mx(x, f, block_size, m):
        scale, data = ao.to_mx(x.to(gpu_device), f, block_size, m)
        return scale.cpu(), data.cpu()

    problem = every_block_size_problem(to_mx, fmt, mode, f"torchao on {gpu_device}", record_observation)
    assert problem is None, problem
