"""The CUDA device's behaviour profile against the golden pinned for its kind (cuda-smXY).
With --fp8-dry-run it runs the same comparison on the CPU device against the cpu golden, so
the GPU path of the profile code stays alive in CI. See tests/cpu/tools/test_golden_profile.py for
why a profile may differ and how to re-pin."""

import os
from pathlib import Path

import pytest

from fp8ref.harness.golden import compare_with_golden, pin_first
from tests.common.paths import GOLDEN

# this test pins the device's own kind alone (not the CPU golden too)
HOW_TO_PIN = "pytest tests/gpu/test_golden_profile.py --fp8-update-golden"


def test_behaviour_profile_matches_the_golden_for_this_device(request, gpu_device, tmp_path, record_observation):
    """Against the pinned golden; on a device kind with none yet (a first GPU run), the profile is
    pinned in the run's output folder (FP8REF_RESULTS_DIR, else a temporary one) and collected
    again: the first run already fails if the profile is not deterministic on this device."""
    update = request.config.getoption("--fp8-update-golden")
    status, lines = compare_with_golden(GOLDEN, gpu_device, update=update, how_to_pin=HOW_TO_PIN)
    if status == "updated":
        pytest.skip(lines[0])
    if status == "missing":
        out = Path(os.environ.get("FP8REF_RESULTS_DIR") or tmp_path)
        status, lines = pin_first(out, gpu_device)
        record_observation(f"golden profile ({gpu_device}), first run", lines[0])
        assert status == "pinned", "two collections of this device's profile differ:\n" + "\n".join(lines)
        return
    assert status == "equal", "FP8 behaviour differs from the pinned golden:\n" + "\n".join(lines)
