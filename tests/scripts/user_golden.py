"""A user's own golden through pytest's options, as a user runs them: ``pytest --fp8-golden PATH``
with PATH missing (a skip that says how to pin), ``--fp8-update-golden`` (pins PATH), one key
changed in PATH (the golden test fails naming it, ``--fp8-report`` writes its report), the change
accepted with ``python -m fp8ref accept`` (passes), a folder as PATH, the GPU test's dry run
against a user's folder, a golden of another device kind (a usage error before the profile), and
a team's claims and workload joining its golden. Each is one ``pytest.main`` in this one interpreter, with fp8ref's CPU
golden standing in for the collected profile (collecting is tested elsewhere; this checks the
wiring, in a few seconds).

Usage: python tests/scripts/user_golden.py FOLDER; prints one JSON line: per run, its exit code
and each test's outcome and message (from its junit XML), and what was written.
"""

import copy
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import fp8ref.harness.profiles.profile
from fp8ref.__main__ import main as fp8ref_main
from fp8ref.harness.profiles.profile_file import load

ROOT = Path(__file__).resolve().parents[2]  # the checkout
folder = Path(sys.argv[1])
# the install's profile stands in as fp8ref's pinned one: no probe runs, the wiring is what is checked
here = load(ROOT / "tests" / "golden" / "cpu.json")
collected: list[str] = []  # the devices profiles were collected on, run by run


def collect(device: str = "cpu", torchao: bool = True, claims: tuple[str, ...] = ()) -> dict:
    collected.append(device)
    return copy.deepcopy(here)


TEAM_CLAIMS = """
from pathlib import Path

import torch

from fp8ref.harness.claims import CastClaim, check_cast_claim


def quantize(x):
    scale = (448.0 / x.abs().amax().double().clamp(min=1e-12)).float()
    y = (x * scale).clamp(-448.0, 448.0)
    if Path(__file__).with_name("bug").exists():
        y = y.to(torch.float16)
    return y.to(torch.float8_e4m3fn), scale


def results():
    return check_cast_claim(quantize, CastClaim(), examples=0)  # (the named cases: hypothesis may be absent)


def step():
    return quantize(torch.linspace(-2.0, 2.0, 32))
"""
CPU_TEST = str(ROOT / "tests" / "cpu" / "tools" / "test_golden_profile.py")
GPU_TEST = str(ROOT / "tests" / "gpu" / "test_golden_profile.py")
mine = folder / "stack.json"
results: dict = {}


def run(name: str, *args: str, test: str = CPU_TEST) -> None:
    junit = folder / f"{name}.xml"
    collected.clear()
    code = pytest.main([test, "-q", "-p", "no:randomly", "-p", "no:cacheprovider", f"--junitxml={junit}", *args])
    cases, texts = [], {}
    for case in ET.parse(junit).getroot().iter("testcase") if junit.exists() else ():
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, message = child.tag, child.get("message") or child.text or ""
                texts[case.get("name")] = child.text or ""  # (whole: the message is cut short)
        cases.append([case.get("name"), outcome, message])
    results[name] = {"exit": int(code), "cases": cases, "texts": texts, "collected": list(collected)}


def main() -> None:
    run("missing", "--fp8-golden", str(mine))
    run("pin", "--fp8-golden", str(mine), "--fp8-update-golden", "--fp8-report", str(folder / "pin.json"))
    results["pin_report"] = json.loads((folder / "pin.json").read_text()) if (folder / "pin.json").exists() else None
    results["pinned"] = json.loads(mine.read_text())["behaviour"] == here["behaviour"] if mine.exists() else False

    key = "cast.e4m3fn.bf16.overflow"
    pinned = json.loads(mine.read_text())
    pinned["behaviour"][key] = "nonsaturate" if here["behaviour"][key] == "saturate" else "saturate"
    mine.write_text(json.dumps(pinned))
    report = folder / "report.md"
    run("changed", "--fp8-golden", str(mine), "--fp8-report", str(report))
    results["report"] = report.read_text() if report.exists() else ""

    now = folder / "now.json"
    now.write_text(json.dumps(here))
    results["accept"] = fp8ref_main(["accept", str(mine), str(now), "--why", "our loss scaler clips first"])
    run("accepted", "--fp8-golden", str(mine))

    goldens = folder / "goldens"
    goldens.mkdir()  # (an output's folder must exist: fp8ref creates none)
    run("folder", "--fp8-golden", str(goldens), "--fp8-update-golden")
    results["folder_pinned"] = sorted(p.name for p in goldens.iterdir()) if goldens.exists() else []
    run("gpu dry run", "--fp8-golden", str(goldens), "--fp8-dry-run", test=GPU_TEST)
    run("gpu dry run, missing", "--fp8-golden", str(folder / "none"), "--fp8-dry-run", test=GPU_TEST)
    cuda = copy.deepcopy(here)
    cuda["versions"]["device"] = "cuda-sm90"
    (folder / "cuda.json").write_text(json.dumps(cuda))
    run("other device", f"--fp8-golden={folder / 'cuda.json'}")

    # a team's claims join its golden: pinned with its kernel right, then compared with the kernel
    # rounding through float16 (a file beside it says so)
    (folder / "fp8team_claims.py").write_text(TEAM_CLAIMS)
    sys.path.insert(0, str(folder))
    claims = ["--fp8-claims", "fp8team_claims:results", "--fp8-workload=fp8team_claims:step"]
    claims_golden = folder / "claims.json"
    run("claims pinned", "--fp8-golden", str(claims_golden), "--fp8-update-golden", *claims)
    pinned = json.loads(claims_golden.read_text())["behaviour"] if claims_golden.exists() else {}
    results["claims_pinned"] = {k: v for k, v in pinned.items() if k.startswith("claim.")}
    results["workload_pinned"] = {k: v for k, v in pinned.items() if k.startswith("workload.fp8team")}
    (folder / "bug").write_text("")
    claims_report = folder / "claims-report.md"
    run("claims changed", "--fp8-golden", str(claims_golden), *claims, "--fp8-report", str(claims_report))
    results["claims_report"] = claims_report.read_text() if claims_report.exists() else ""


# (tests/scripts/pytest_each.py may run this in an interpreter that other runs share: what it
# changed is put back)
original = fp8ref.harness.profiles.profile.collect
fp8ref.harness.profiles.profile.collect = collect
try:
    main()
finally:
    fp8ref.harness.profiles.profile.collect = original
print(json.dumps(results))
