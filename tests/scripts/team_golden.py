"""A team's own suite with fp8ref installed and no checkout: a folder outside fp8ref's, no conftest,
fp8ref's plugin from its entry point. Its golden through the plugin's options: pinned from the
team's workload, held to it (passes), the team's step changed (the golden item fails naming the
key and the team's line, ``--fp8-report`` writes the upgrade report), then each usage error
(output paths under a missing folder or ``/proc``, a golden of another device kind, targets that
are not there) and a hung workload stopped by ``--fp8-workload-timeout``. Each run is one
``pytest.main`` in this interpreter (torch and fp8ref imported once), its output read from the
file descriptors as a process of its own would write it.

Usage: python tests/scripts/team_golden.py FOLDER; prints one JSON line: per run, its exit code,
stdout, stderr, seconds and the team folder's files after it; and what was written.
"""

import gc
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # (the team's step is rewritten between runs: no cached bytecode of it)

import pytest  # noqa: E402 - after the bytecode switch

STEP = """import time

import torch


def run():
    x = torch.linspace(-3.0, 3.0, 256).reshape(16, 16)
    w = torch.linspace(-1.0, 1.0, 256).reshape(16, 16)
    xq = x.to(torch.float8_e4m3fn)
    wq = w.to(torch.float8_e4m3fn)  # the team's line
    one = torch.ones(())
    return torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)


def takes(steps):
    return steps


def hangs():
    time.sleep(60)
"""
CHANGED = STEP.replace("wq = w.to(torch.float8_e4m3fn)", "wq = (w * 0.5).to(torch.float8_e4m3fn)")
assert CHANGED != STEP

folder = Path(sys.argv[1])
team = folder / "team"
(team / "fp8team").mkdir(parents=True)
(team / "fp8team" / "__init__.py").write_text("")
(team / "fp8team" / "step.py").write_text(STEP)
(team / "ci").mkdir()
(team / "test_team.py").write_text("def test_their_own():\n    pass\n")
(folder / "tmp").mkdir()
results: dict = {"step": STEP, "changed_step": CHANGED}


def files() -> list[str]:
    return sorted(p.relative_to(team).as_posix() for p in team.rglob("*") if "__pycache__" not in p.parts)


def run(name: str, *args: str) -> None:
    argv = ["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-rA", "test_team.py", *args]
    argv.append(f"--basetemp={folder / 'tmp' / name.replace(' ', '-')}")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        here = os.getcwd()
        started = time.monotonic()
        try:
            os.chdir(team)
            code = int(pytest.main(argv))
        finally:
            seconds = time.monotonic() - started
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            os.chdir(here)
        out.seek(0), err.seek(0)
        results[name] = {
            "exit": code,
            "out": out.read().decode(errors="replace"),
            "err": err.read().decode(errors="replace"),
            "seconds": seconds,
            "files": files(),
        }
    # (what the runs so far made stays: pytest's gc.collect at each run's end then skips torch's
    # hundreds of thousands of objects, half a second a run)
    gc.freeze()


WORKLOAD = "--fp8-workload=fp8team.step:run"
CPU = "--fp8-golden-device=cpu"  # (on a GPU machine the default would be cuda)
run("missing", WORKLOAD, "--fp8-golden=ci/fp8.json", CPU)
run("pin", WORKLOAD, "--fp8-golden=ci/fp8.json", CPU, "--fp8-update-golden")
golden = team / "ci" / "fp8.json"
results["pinned"] = json.loads(golden.read_text()) if golden.exists() else None
run("same", WORKLOAD, "--fp8-golden=ci/fp8.json", CPU)

# the team changes its step: a new module, imported afresh
(team / "fp8team" / "step.py").write_text(CHANGED)
for module in [m for m in sys.modules if m == "fp8team" or m.startswith("fp8team.")]:
    del sys.modules[module]
importlib.invalidate_caches()
(team / "out").mkdir()
run("changed", WORKLOAD, "--fp8-golden=ci/fp8.json", CPU, "--fp8-report=out/report.md")
report = team / "out" / "report.md"
results["report"] = report.read_text() if report.exists() else ""

# usage errors, each before pytest collects; nothing is created
run("report under /proc", WORKLOAD, "--fp8-report=/proc/nope/r.md")
run("report under a missing folder", WORKLOAD, "--fp8-report=nope/r.md")
run("report in /proc", WORKLOAD, "--fp8-report=/proc/r.md")
run("golden under a missing folder", WORKLOAD, "--fp8-golden=nope/fp8.json", CPU, "--fp8-update-golden")
# (a golden of another device kind: the pinned one relabelled, or, where nothing was pinned, a
# profile that holds nothing else)
cuda = json.loads(json.dumps(results["pinned"])) if results["pinned"] else {}
cuda = cuda or {"fp8ref_profile": 1, "versions": {"torch": "2.13.0"}, "behaviour": {}, "traces": {}}
cuda["versions"]["device"] = "cuda-sm90"
(team / "ci" / "cuda.json").write_text(json.dumps(cuda))
run("golden of another device", WORKLOAD, "--fp8-golden=ci/cuda.json", CPU)
run("pin over a golden of another device", WORKLOAD, "--fp8-golden=ci/cuda.json", CPU, "--fp8-update-golden")
results["cuda_left"] = json.loads((team / "ci" / "cuda.json").read_text()) == cuda
run("no module", "--fp8-workload=fp8team.nowhere:run")
run("no function", "--fp8-workload=fp8team.step:nothing")
run("takes arguments", "--fp8-workload=fp8team.step:takes")
run("claims: no module", "--fp8-claims=fp8team.nowhere:results")
run("update without a golden", WORKLOAD, "--fp8-update-golden")
run("a golden of nothing", "--fp8-golden=ci/fp8.json", CPU)

# (pinning it too: a golden of a run whose target gave no result is not written)
hung = ["--fp8-workload=fp8team.step:hangs", "--fp8-workload-timeout=0.5", "--fp8-golden=ci/hung.json", CPU]
run("hung", *hung, "--fp8-update-golden")
print(json.dumps(results))
