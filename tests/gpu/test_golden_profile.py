"""The CUDA device's behaviour profile against the golden pinned for its kind (cuda-smXY).
With --fp8-dry-run it runs the same comparison on the CPU device against the cpu golden, so
the GPU path of the profile code stays alive in CI. See tests/cpu/tools/test_golden_profile.py for
why a profile may differ and how to re-pin."""

import pytest

from fp8ref.harness.golden import compare_with_golden
from tests.common.paths import GOLDEN

# this test pins the device's own kind alone (not the CPU golden too)
HOW_TO_PIN = "pytest tests/gpu/test_golden_profile.py --fp8-update-golden"


def test_behaviour_profile_matches_the_golden_for_this_device(request, gpu_device):
    update = request.config.getoption("--fp8-update-golden")
    status, lines = compare_with_golden(GOLDEN, gpu_device, update=update, how_to_pin=HOW_TO_PIN)
    if status in ("missing", "updated"):
        pytest.skip(lines[0])
    assert status == "equal", "FP8 behaviour differs from the pinned golden:\n" + "\n".join(lines)
