#!/usr/bin/env python3
"""FP8 behaviour across torch and torchao releases: one virtual environment per install, the CPU
suite and a behaviour profile in each, and docs/version-matrix.md written as a changelog.

Two axes:
- torch: each release in --torch with the newest torchao (of --torchao) that imports with it;
- torchao: each of --torchao against one torch (--torchao-torch).

    python scripts/version_matrix.py                       # the default history (about an hour)
    python scripts/version_matrix.py --torch 2.13.0 2.14.1 --torchao 0.18.0 --keep
    python scripts/version_matrix.py --torch 2.9.1 2.15.0 --torch-axis-only --build-only --work DIR
                                                           # CI's oldest and newest installs

Exact versions are installed with every local pip configuration ignored (PIP_CONFIG_FILE set to
the null device), since a machine's constraints file may cap torch below the release asked for;
the version each venv really got is checked, and a mismatch stops the script. Venvs live under
--work and are deleted after use unless --keep (a CUDA build of torch takes about 7 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fp8ref.harness.profiles.profile_file import diff, load  # noqa: E402
from fp8ref.harness.stack.refusals import normalize  # noqa: E402

DEFAULT_TORCH = ["2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"]
DEFAULT_TORCHAO = ["0.15.0", "0.16.0", "0.17.0", "0.18.0"]
# the versions CI pins, so only torch and torchao vary between installs
PINNED = [
    "pytest>=8",
    "hypothesis>=6.100",
    "pytest-benchmark>=4",
    "numpy>=1.26",
    "ml-dtypes==0.6.0",
    "transformers==5.24.0",
    "accelerate==1.15.0",
    "datasets==5.2.0",
    "matplotlib>=3.7",
    "tqdm>=4.60",
    "safetensors==0.8.0",
    "gfloat==0.5.2",
    "expecttest==0.3.0",
]
IMPORT_CHECK = "from torchao.float8 import Float8LinearConfig, convert_to_float8_training"


class VersionMismatch(SystemExit):
    pass


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_CONSTRAINT", None)
    return subprocess.run(cmd, text=True, capture_output=True, env={**env, **kw.pop("env", {})}, **kw)


def _last_line(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else f"exit {r.returncode}"


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def _installed(py: Path, pkg: str) -> str | None:
    r = sh([str(py), "-c", f"import importlib.metadata as m; print(m.version({pkg!r}))"])
    return r.stdout.strip() if r.returncode == 0 else None


def _pip(py: Path, *args: str) -> subprocess.CompletedProcess:
    return sh([str(py), "-m", "pip", "install", "-q", "--no-cache-dir", *args])


def build(venv: Path, torch_v: str, ao_candidates: list[str], keep: bool) -> dict:
    """A venv with torch==torch_v, the first of ao_candidates that imports, fp8ref and its extras."""
    t0 = time.time()
    py = venv / "bin" / "python"
    entry: dict = {"torch_asked": torch_v, "torchao_tried": []}
    record = venv / "fp8ref-build.json"  # how long the venv took to build, kept for reruns with --keep
    reused = keep and py.exists()
    if not reused:
        shutil.rmtree(venv, ignore_errors=True)
        sh([sys.executable, "-m", "venv", str(venv)])
        for args in ([f"torch=={torch_v}"], PINNED, ["--no-deps", "-e", str(ROOT)]):
            r = _pip(py, *args)
            if r.returncode:
                entry["error"] = f"pip install {' '.join(args)}: {_last_line(r)}"
                return entry
    got = _installed(py, "torch")
    if got is None or _base(got) != torch_v:
        raise VersionMismatch(
            f"{venv}: asked for torch {torch_v}, the venv has {got}; a pip constraint or "
            f"index served another version. Nothing was measured for this install."
        )
    entry["torch"] = got
    for ao in ao_candidates:
        have = _installed(py, "torchao")
        if have != ao:
            r = _pip(py, "--no-deps", f"torchao=={ao}")
            if r.returncode:
                entry["torchao_tried"].append((ao, f"pip: {_last_line(r)}"))
                continue
            have = _installed(py, "torchao")
            if have != ao:
                raise VersionMismatch(f"{venv}: asked for torchao {ao}, the venv has {have}")
        r = sh([str(py), "-c", IMPORT_CHECK])
        if r.returncode == 0:
            entry["torchao"] = ao
            break
        entry["torchao_tried"].append((ao, normalize(_last_line(r))))
    else:
        sh([str(py), "-m", "pip", "uninstall", "-y", "-q", "torchao"])
        entry["torchao"] = None
    entry["build_seconds"] = round(time.time() - t0, 1)
    if reused and record.exists():
        entry["build_seconds"] = json.loads(record.read_text()).get("build_seconds", entry["build_seconds"])
    elif not reused:
        record.write_text(json.dumps({"build_seconds": entry["build_seconds"]}))
    return entry


_FAIL = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_SKIP = re.compile(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$")


def run_suite(py: Path) -> dict:
    t0 = time.time()
    r = sh(
        [
            str(py),
            "-m",
            "pytest",
            "-m",
            "cpu",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rfEs",
            "-o",
            "addopts=--strict-markers",
        ],
        cwd=ROOT,
        env={"FP8REF_HYPOTHESIS_PROFILE": "ci", "COLUMNS": "400"},
    )
    lines = r.stdout.splitlines()
    summary = next(
        (ln.strip("= ") for ln in reversed(lines) if re.search(r"\d+ (passed|failed|error)", ln)), _last_line(r)
    )
    failed = [(m.group(2), (m.group(3) or "").strip()[:240]) for ln in lines if (m := _FAIL.match(ln))]
    skipped = [(int(m.group(1)), m.group(2)[:240]) for ln in lines if (m := _SKIP.match(ln))]
    parity = next(
        (ln.split("parity: ", 1)[1] for ln in lines if ln.startswith("finetune tiny:") and "parity: " in ln), None
    )
    return {
        "rc": r.returncode,
        "summary": re.sub(r" in [\d.]+s.*$", "", summary),
        "failed": failed,
        "skipped": skipped,
        "seconds": round(time.time() - t0, 1),
        "parity": parity,
    }


def run_profile(py: Path, out: Path) -> dict:
    t0 = time.time()
    r = sh([str(py), "-m", "fp8ref", "profile", "--out", str(out)], cwd=ROOT)
    res = {"profile": str(out) if r.returncode == 0 else None, "profile_seconds": round(time.time() - t0, 1)}
    if r.returncode:
        res["profile_error"] = f"exit {r.returncode}: {_last_line(r)}".replace("|", "\\|")[:200]
    return res


def measure(
    work: Path, tag: str, torch_v: str, aos: list[str], keep: bool, build_only: bool = False, suite: bool = True
) -> dict:
    venv = work / tag
    entry = build(venv, torch_v, aos, keep)
    if "error" not in entry and not build_only:
        py = venv / "bin" / "python"
        if suite:
            entry["suite"] = run_suite(py)
        entry.update(run_profile(py, work / "profiles" / f"{tag}.json"))
    if not keep:
        shutil.rmtree(venv, ignore_errors=True)
    print(tag, json.dumps(entry), flush=True)
    return entry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch", nargs="+", default=DEFAULT_TORCH, help="torch releases, oldest first")
    ap.add_argument("--torchao", nargs="+", default=DEFAULT_TORCHAO, help="torchao releases, oldest first")
    ap.add_argument("--torchao-torch", default="2.13.0", help="the torch the torchao axis runs on")
    ap.add_argument("--work", default="/tmp/fp8ref-matrix")
    ap.add_argument("--keep", action="store_true", help="keep the venvs, and reuse those already there")
    ap.add_argument("--out", default=str(ROOT / "docs" / "version-matrix.md"))
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument(
        "--torch-axis-only",
        action="store_true",
        help="skip the torchao axis (CI's oldest/newest installs: only the torch releases given)",
    )
    ap.add_argument(
        "--build-only",
        action="store_true",
        help="only build the venvs (implies --keep), e.g. ahead of a run on a quiet machine",
    )
    ap.add_argument(
        "--no-suite",
        action="store_true",
        help="only the profiles, not `pytest -m cpu` in each install (its table says so; CI runs the suite "
        "on its end installs)",
    )
    args = ap.parse_args()
    if args.build_only:
        args.keep = True

    work = Path(args.work)
    (work / "profiles").mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    newest_first = list(reversed(args.torchao))
    suite = not args.no_suite
    torch_axis = {
        tv: measure(work, f"torch{tv}", tv, newest_first, args.keep, args.build_only, suite) for tv in args.torch
    }
    ao_axis = {}
    for av in [] if args.torch_axis_only else args.torchao:
        same = torch_axis.get(args.torchao_torch)
        if same is not None and same.get("torchao") == av:
            ao_axis[av] = same  # already measured on the torch axis
        else:
            ao_axis[av] = measure(
                work,
                f"torch{args.torchao_torch}-torchao{av}",
                args.torchao_torch,
                [av],
                args.keep,
                args.build_only,
                suite,
            )
    total = time.time() - t_start
    if args.build_only:
        print(f"built the venvs under {work} in {total / 60:.1f} min")
        return 0
    results = {
        "torch_axis": torch_axis,
        "torchao_axis": ao_axis,
        "torchao_torch": args.torchao_torch,
        "total_seconds": round(total),
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "suite": suite,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    Path(args.out).write_text(render(results))
    print(f"wrote {args.out} in {total / 60:.1f} min")
    return 0


# --- rendering ---------------------------------------------------------------------------------


def _label(e: dict) -> str:
    return f"torch {e.get('torch', e['torch_asked'])} + torchao {e.get('torchao') or 'none'}"


def changelog(entries: list[dict]) -> list[tuple[str, str, object, object]]:
    """(key, first install where it changed, old, new) along a sequence of installs, every change."""
    rows = []
    have = [e for e in entries if e.get("profile")]
    for prev, cur in zip(have, have[1:]):
        for k, old, new in diff(load(prev["profile"]), load(cur["profile"])):
            rows.append((k, _label(cur), old, new))
    return rows


def _cell(v: object) -> str:
    s = repr(v)
    return (s if len(s) <= 120 else s[:117] + "...").replace("|", "\\|")


def _changes_table(rows) -> list[str]:
    if not rows:
        return ["No behaviour key differs between consecutive installs.", ""]
    out = ["| key | first in | before | after |", "| --- | --- | --- | --- |"]
    out += [f"| `{k}` | {where} | {_cell(a)} | {_cell(b)} |" for k, where, a, b in rows]
    return out + [""]


def _suite_cell(e: dict) -> tuple[str, str]:
    if "error" in e:
        return "not built", e["error"].replace("|", "\\|")
    if "suite" not in e:
        return "not run (--no-suite)", "-"
    s = e["suite"]
    why = "; ".join(f"`{t.split('::', 1)[-1]}`: {r}".replace("|", "\\|") for t, r in s["failed"][:8])
    if len(s["failed"]) > 8:
        why += f"; ... {len(s['failed']) - 8} more"
    return f"{s['summary']} ({s['seconds']:.0f} s)", why or "-"


HEADLINE_KEYS = [
    "cast.e4m3fn.bf16.overflow",
    "cast.e4m3fn.bf16.inf",
    "cast.e4m3fn.f16.overflow",
    "cast.e5m2.bf16.overflow",
    "cast.e8m0fnu.bf16.no_encoding",
    "finfo.e5m2fnuz.eps",
    "scaled_mm.tensorwise.bf16",
    "scaled_mm.rowwise.bf16",
    "torchao.digest.float8linear.tensorwise",
    "torchao.digest.float8linear.rowwise",
]


def _short(v: object) -> str:
    s = str(v)
    return "refused" if s.startswith("refused:") else s.replace("|", "\\|")


def _by_version_table(entries: list[dict]) -> list[str]:
    """The headline keys (casts' overflow modes, finfo, _scaled_mm, torchao digests) per install."""
    have = [e for e in entries if e.get("profile")]
    if not have:
        return []
    profiles = [load(e["profile"])["behaviour"] for e in have]
    out = [
        "| key | " + " | ".join(e.get("torch", e["torch_asked"]).split("+")[0] for e in have) + " |",
        "| --- |" + " --- |" * len(have),
    ]
    for k in HEADLINE_KEYS:
        out.append(f"| `{k}` | " + " | ".join(_short(p.get(k, "-")) for p in profiles) + " |")
    return out + [""]


def render(results: dict) -> str:
    t_axis, a_axis = results["torch_axis"], results["torchao_axis"]
    lines = [
        "# FP8 behaviour across torch and torchao releases",
        "",
        f"Generated on {results.get('date', 'an unrecorded date')} by `python scripts/version_matrix.py` "
        "(CPU; one fresh venv per install with",
        "ml-dtypes 0.6.0, transformers 5.24.0 and datasets 5.2.0 pinned, "
        + ("`pytest -m cpu` and " if results.get("suite", True) else "not the suite (--no-suite), ")
        + "`python -m fp8ref profile` in each). Python "
        + results["python"]
        + f"; total wall time {results['total_seconds'] / 60:.0f} minutes, venv builds included.",
        "",
        "## The installs",
        "",
        "| torch | torchao (newest that imports) | tried and refused | venv build | profile |",
        "| --- | --- | --- | --- | --- |",
    ]
    # every install measured, the torchao axis's too (each once): a profile that failed there is shown
    shown: list[dict] = []
    for e in list(t_axis.values()) + list(a_axis.values()):
        if all(e is not other for other in shown):
            shown.append(e)
    for e in shown:
        tv = e.get("torch", "?")
        tried = "; ".join(f"{v}: {why}".replace("|", "\\|")[:160] for v, why in e.get("torchao_tried", [])) or "-"
        prof = "collected" if e.get("profile") else e.get("profile_error", e.get("error", "-"))
        lines.append(
            f"| {e.get('torch', tv)} | {e.get('torchao') or 'none'} | {tried} | "
            f"{e.get('build_seconds', 0):.0f} s | {prof} |"
        )
    lines += ["", "## Headline behaviours by torch release", ""] + _by_version_table(list(t_axis.values()))
    lines += [
        "## What changed along torch (each with the newest torchao that imports)",
        "",
        "Each row is a behaviour key whose value differs from the install before it. A change in",
        "a `torchao.*` key where the torchao version changed too is torchao's: see the next section.",
        "",
    ]
    lines += _changes_table(changelog(list(t_axis.values())))
    lines += [f"## What changed along torchao (torch {results['torchao_torch']})", ""]
    lines += _changes_table(changelog(list(a_axis.values())))
    lines += [
        "## The suite on each install",
        "",
        "| install | pytest -m cpu | failed, and why |",
        "| --- | --- | --- |",
    ]
    seen = set()
    for e in list(t_axis.values()) + list(a_axis.values()):
        if id(e) in seen:
            continue
        seen.add(id(e))
        summary, why = _suite_cell(e)
        lines.append(f"| {_label(e)} | {summary} | {why} |")
    lines += ["", "The bf16-vs-FP8 parity check of the suite (tiny preset, torchao tensorwise, CPU) on each torch:", ""]
    for e in t_axis.values():
        if e.get("suite", {}).get("parity"):
            lines.append(f"- {_label(e)}: {e['suite']['parity']}")
    lines += [
        "",
        "Tests skipped because the install refused their subject (the question is asked with a minimal",
        "call: `fp8ref.harness.stack.install`), per install:",
        "",
    ]
    for e in list(t_axis.values()):
        if "suite" not in e:
            continue
        what, answers, count = [], [], 0
        for n, reason in e["suite"]["skipped"]:
            m = re.search(r"cannot do (.*?): ((?:refused|missing): .*)$", reason)
            if m:
                what.append(m.group(1))
                answers.append(m.group(2))
                count += n
        if count:
            answer = min(answers, key=len)  # the same refusal, cut at different lengths by pytest
            lines.append(
                f"- {_label(e)}: {count} tests ({'; '.join(dict.fromkeys(what))}): `{answer[:160]}`".replace("|", "\\|")
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
