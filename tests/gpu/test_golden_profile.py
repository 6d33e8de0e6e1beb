"""The CUDA device's behaviour profile against the golden pinned for its kind (cuda-smXY in
fp8ref's tests/golden, or in the folder or file ``--fp8-golden PATH`` names). With --fp8-dry-run
it runs the same comparison on the CPU device against the cpu golden, so the GPU path of the
profile code stays alive in CI. See tests/cpu/tools/test_golden_profile.py for why a profile may
differ and how to re-pin."""

import os
from pathlib import Path

import pytest

from fp8ref.harness.profiles import profile
from fp8ref.harness.profiles.golden import compare_with_golden, golden_path, pin_first

# this test pins the device's own kind alone (not the CPU golden too)
TEST = "tests/gpu/test_golden_profile.py"
HOW_TO_PIN = f"pytest {TEST} --fp8-update-golden"


def test_behaviour_profile_matches_the_golden_for_this_device(
    request, gpu_device, tmp_path, record_observation, record_golden, golden, with_team_targets
):
    """Against the pinned golden; on a device kind with none yet in fp8ref's own goldens (a first
    GPU run), the profile is pinned in the run's output folder (FP8REF_RESULTS_DIR, else a
    temporary one) and collected again: the first run already fails if the profile is not
    deterministic on this device. A user's golden that is missing skips, saying how to pin it."""
    update = request.config.getoption("--fp8-update-golden")
    # collected only when there is a golden to compare with or to write: it takes tens of seconds on a GPU
    wanted = update or golden_path(golden.where, gpu_device).exists()
    now = with_team_targets(profile.collect(gpu_device)) if wanted else None
    status, lines = compare_with_golden(
        golden.where, gpu_device, update=update, now=now, how_to_pin=golden.how_to_pin(TEST)
    )
    record_golden(golden.where, gpu_device, status, lines, now)
    if status == "missing" and request.config.getoption("--fp8-require-golden"):
        pytest.fail("--fp8-require-golden: " + "\n".join(lines))
    if status == "updated" or (status == "missing" and golden.owned):
        pytest.skip(" ".join(lines))
    if status == "missing":
        out = Path(os.environ.get("FP8REF_RESULTS_DIR") or tmp_path)
        status, lines = pin_first(out, gpu_device)
        record_observation(f"golden profile ({gpu_device}), first run", lines[0])
        assert status == "pinned", "two collections of this device's profile differ:\n" + "\n".join(lines)
        return
    assert status not in ("unreadable", "wrong device"), "\n".join(lines)
    assert status in ("equal", "named"), "FP8 behaviour differs from the pinned golden:\n" + "\n".join(lines)
