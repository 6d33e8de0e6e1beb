"""The profile degrades, never crashes, on a stack whose torchao is installed but raises while it
imports (a torchao built for another torch): collected in a process of its own with such a
torchao first on the path. Its keys read the install's refusal, transformers' FP8 keys are still
collected (transformers imports an installed torchao itself while it builds a model), and the
golden comparison leaves the torchao keys out as not usable here. A whole profile: behind
--fp8-slow (CI runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fp8ref.harness.profiles.golden import compare_with_golden
from tests.common.paths import GOLDEN, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs("transformers", "accelerate")]


def test_a_torchao_that_raises_on_import_is_recorded_and_the_profile_goes_on(tmp_path):
    broken = tmp_path / "site" / "torchao"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise RuntimeError("torchao was built for another torch")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    out = tmp_path / "profile.json"
    run = subprocess.run(
        [sys.executable, "-m", "fp8ref", "profile", "--out", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    profile = json.loads(out.read_text())
    behaviour = profile["behaviour"]
    assert behaviour["torchao"] == "refused: RuntimeError: torchao was built for another torch"
    assert not [k for k in behaviour if k.startswith("torchao.")]
    # transformers' fine-grained FP8 imports the installed torchao itself: its answer is that refusal,
    # or (a transformers that does not) its keys collected as ever
    if "transformers.fp8" in behaviour:
        assert behaviour["transformers.fp8"] == behaviour["torchao"]
    else:
        assert behaviour["transformers.fp8.quantize.float"].startswith(("definition", "deviates"))
    status, lines = compare_with_golden(GOLDEN, "cpu", now=profile)
    assert status in ("equal", "differs"), lines
    left_out = ("torchao", "checkpoint.torchao", "grouped.torchao", "transformers")
    assert not [line for line in lines if line.startswith(left_out)], lines
