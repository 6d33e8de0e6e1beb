"""The behaviour profile with each of fp8ref's own needs hidden (numpy, hypothesis, expecttest,
gfloat, ml_dtypes: ``refusals.OWN_NEEDS``), in a process of its own: no value may blame the
install for it (``refused:``, ``fails:`` or ``missing:`` naming the package), the profile is still
collected (exit 0), and a golden is not pinned from it while a key reads "not measured here".
Before, without numpy every torchao digest, MX, NVFP4 and QAT key read ``refused: RuntimeError:
Numpy is not available`` (fp8ref's own ``.numpy()``), a golden pinned that, and an upgrade then
reported no numerics change. A whole profile per package: behind --fp8-slow (CI runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fp8ref.harness.profiles.golden import compare_with_golden
from fp8ref.harness.stack.refusals import NOT_MEASURED, OWN_NEEDS
from tests.common.paths import GOLDEN, ROOT

pytestmark = pytest.mark.slow

_BLAMED = ("refused", "fails", "missing")


def blamed_on_the_install(behaviour: dict, package: str) -> list[str]:
    """The keys whose value reads as the install's answer while it names ``package``."""
    return [
        f"{k}: {v}"
        for k, v in behaviour.items()
        if isinstance(v, str)
        and v.startswith(_BLAMED)
        and package.lower() in v.lower()
        and not v.startswith(NOT_MEASURED)
    ]


@pytest.mark.parametrize("package", OWN_NEEDS)
def test_a_hidden_own_need_is_never_the_installs_answer(package, tmp_path):
    out = tmp_path / "profile.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.common.hidden_packages", package, "-m", "fp8ref", "profile", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    profile = json.loads(out.read_text())
    blamed = blamed_on_the_install(profile["behaviour"], package)
    assert not blamed, f"{package} hidden, these keys blame the install for it:\n" + "\n".join(blamed[:20])
    # held to fp8ref's golden, nothing differs: each key is the install's answer as pinned, or not
    # compared because the package was hidden (a key absent under a gate that says so included)
    status, lines = compare_with_golden(GOLDEN, now=profile)
    assert status in ("equal", "named"), "\n".join(lines[:20])
    unmeasured = [k for k, v in profile["behaviour"].items() if isinstance(v, str) and v.startswith(NOT_MEASURED)]
    golden = tmp_path / "g.json"
    status, lines = compare_with_golden(golden, update=True, now=profile)
    if unmeasured:
        assert status == "not measured" and not golden.exists() and package in lines[0], lines
    else:
        assert status == "updated", lines


def test_the_check_sees_a_value_that_blames_the_install():
    behaviour = {"torchao.digest.cast.rowwise": "refused: RuntimeError: Numpy is not available"}
    assert blamed_on_the_install(behaviour, "numpy")
    assert not blamed_on_the_install({"k": "not measured here: fp8ref needs numpy"}, "numpy")
