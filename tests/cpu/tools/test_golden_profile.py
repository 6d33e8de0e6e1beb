"""This install's behaviour profile against the golden one pinned for CPU (tests/golden/cpu.json).

Why it may differ: the golden records what *one* set of versions did where correct installs may
legitimately differ (overflow modes, NaN codes, finfo values, which _scaled_mm configurations run,
torchao's recipe table, bit-exact digests of torchao's casts and Float8Linear, the emulated-MLP
loss curve). Another torch or torchao can change any of them, or refuse an operation (the key then
reads ``refused: ...``); the failure names each key, its pinned value and versions, and its value
now, one line per key. The digests use inputs whose GEMMs are exact in any summation order and the
MLP losses compare within a stated tolerance, so another CPU alone changes nothing. Decide whether
the change is acceptable, then re-pin on purpose:
``pytest tests/cpu/tools/test_golden_profile.py --fp8-update-golden`` and a commit message that says
why. Invariants are not here: they are asserted by the other tests.

Other installs CI runs (the oldest and newest of the version matrix) are held to the same golden
with the differences named for each in tests/golden/cpu-installs.json: each key and the value that
install gives, and why. Any other difference, or a named one that is gone, still fails.
"""

import pytest

from fp8ref.harness.golden import compare_with_golden, install_label, named_differences
from tests.common.paths import GOLDEN

HOW_TO_PIN = "pytest tests/cpu/tools/test_golden_profile.py --fp8-update-golden"


# The golden holds torchao's behaviour too: without torchao the profile cannot match it (the
# profile's own tests, tests/cpu/tools/test_profile.py, still run).
@pytest.mark.needs("torchao")
def test_behaviour_profile_matches_the_cpu_golden(request, record_observation, cpu_profile):
    status, lines = compare_with_golden(
        GOLDEN, "cpu", update=request.config.getoption("--fp8-update-golden"), now=cpu_profile, how_to_pin=HOW_TO_PIN
    )
    if status in ("missing", "updated"):
        record_observation("golden profile (cpu)", lines[0])
        pytest.skip(lines[0])
    assert status != "unreadable", "\n".join(lines)
    if status == "named":
        named = named_differences(GOLDEN, cpu_profile)
        assert named is not None
        record_observation(
            f"golden profile (cpu), {install_label(cpu_profile)}", f"{len(named[0])} named differences: {named[1]}"
        )
    assert status in ("equal", "named"), "FP8 behaviour differs from the pinned golden:\n" + "\n".join(lines)
