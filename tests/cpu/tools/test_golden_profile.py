"""This install's behaviour profile against the golden pinned for CPU: fp8ref's own
(tests/golden/cpu.json), or the one a user owns (``--fp8-golden PATH``).

Why it may differ: the golden records what *one* set of versions did where correct installs may
legitimately differ (overflow modes, NaN codes, finfo values, which _scaled_mm configurations run,
torchao's recipe table, bit-exact digests of torchao's casts and Float8Linear, the emulated-MLP
loss curve). Another torch or torchao can change any of them, or refuse an operation (the key then
reads ``refused: ...``); the failure names each key, its pinned value and versions, and its value
now, one line per key (``--fp8-report PATH`` writes the same differences as the upgrade report:
each key's meaning, its consequence for training and its severity). The digests use inputs whose
GEMMs are exact in any summation order and the MLP losses compare within a stated tolerance, so
another CPU alone changes nothing. Decide whether the change is acceptable, then re-pin on
purpose (``--fp8-update-golden``, with ``--fp8-golden PATH`` for your own) and a commit message
that says why, or accept it for this install (``python -m fp8ref accept``). Invariants are not
here: they are asserted by the other tests.

Other installs (for fp8ref's golden: the oldest and newest of CI's version matrix) are held to the
same golden with the differences named for each in the ``-installs.json`` file beside it: each
key and the value that install gives, and why. Any other difference, or a named one that is gone,
still fails.

A team's own golden (``--fp8-golden``) also holds its claims' results when ``--fp8-claims`` names
them (fp8ref's pytest plugin): one ``claim.*`` key per case; and its workloads' traces when
``--fp8-workload`` names them: one ``workload.<target>`` key each.
"""

import pytest

from fp8ref.harness.profiles.golden import (
    accepted_differences,
    compare_with_golden,
    golden_path,
    install_label,
    not_compared_lines,
)
from fp8ref.harness.profiles.profile_file import save
from fp8ref.pytest_golden import accept_hint

TEST = "tests/cpu/tools/test_golden_profile.py"


def test_behaviour_profile_matches_the_cpu_golden(
    request, record_observation, record_golden, record_not_compared, cpu_profile, golden, with_team_targets, tmp_path
):
    # the keys of a package not usable on one side (torchao or transformers not installed, or not
    # importing here) are not compared: said here, and counted by the run's skips of their tests
    update = request.config.getoption("--fp8-update-golden")
    cpu_profile = with_team_targets(cpu_profile)
    status, lines = compare_with_golden(
        golden.where, "cpu", update=update, now=cpu_profile, how_to_pin=golden.how_to_pin(TEST)
    )
    record_golden(golden.where, "cpu", status, lines, cpu_profile)
    if status == "missing" and request.config.getoption("--fp8-require-golden"):
        pytest.fail("--fp8-require-golden: " + "\n".join(lines))
    if status in ("missing", "updated"):
        record_observation("golden profile (cpu)", " ".join(lines))
        pytest.skip(" ".join(lines))
    assert status not in ("unreadable", "wrong device", "not measured"), "\n".join(lines)
    for line in not_compared_lines(golden.where, cpu_profile):
        record_not_compared(line)
    if status == "named":
        named = accepted_differences(golden.where, cpu_profile)
        assert named is not None
        record_observation(
            f"golden profile (cpu), {install_label(cpu_profile)}", f"{len(named[0])} accepted differences: {named[1]}"
        )
    if status == "differs":  # (how to accept them: this profile, saved for python -m fp8ref accept)
        save(cpu_profile, tmp_path / "cpu.json")
        lines.append(accept_hint(golden_path(golden.where, "cpu"), tmp_path / "cpu.json"))
    assert status in ("equal", "named"), "FP8 behaviour differs from the pinned golden:\n" + "\n".join(lines)
