"""Run fp8ref's suite in the environment you already train in, without changing your stack.

    /path/to/your/env/bin/python scripts/your_env.py [--report PATH] [--golden PATH] [-- PYTEST ARGS]

With the Python of that environment (a venv, a conda env, a container's interpreter), from a
checkout of fp8ref. It installs fp8ref itself without its dependencies (``pip install --no-deps
-e .``) and, of the test packages pyproject.toml's ``test`` extra names, only those the
environment lacks (or has too old), under a pip constraint that pins what you have of torch,
torchao, transformers and the packages they bring (so pip can install nothing that moves them; it
installs none of the stack either: without torchao or transformers their tests skip, naming
them). Then it checks that every one of those is exactly the version it was, and runs ``pytest -m cpu``
(``-m gpu`` with ``--gpu``) with ``--fp8-report PATH``: what the suite found, the golden
comparison as an upgrade report and the end-of-run sections, in one Markdown file.

``--golden PATH`` holds the install to a golden you own (pytest's ``--fp8-golden``, with
``--fp8-require-golden``: a missing golden fails the run rather than skipping); without it
the golden test compares with fp8ref's own pin (tests/golden/cpu.json) and its report says how
your stack differs from that one.

Exit codes: pytest's; 2 when the environment cannot run the suite (no torch, pip failed) or the
report cannot be written there (said before anything is installed), 3 when pip changed a package
of your stack (it must not: that is a bug to report).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# your stack: never installed, upgraded or downgraded here
STACK = ("torch", "torchao", "transformers", "triton", "torchvision", "torchaudio")
# what the stack brings with it: pinned where you have it (a test package may need it, e.g.
# ml-dtypes needs numpy: installed where missing, never moved where present)
KEPT = (*STACK, "numpy", "safetensors", "datasets", "tokenizers", "huggingface-hub", "accelerate")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The ``test`` extra of pyproject.toml, as requirement strings (``pytest>=8``)."""
    text = pyproject.read_text()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the one list, read without a TOML parser
        return test_extra_without_toml(text)
    return list(tomllib.loads(text)["project"]["optional-dependencies"]["test"])


def test_extra_without_toml(text: str) -> list[str]:
    """The ``test = [...]`` list of pyproject.toml's text, for a Python without tomllib."""
    block = re.search(r"^test\s*=\s*\[(.*?)^\]", text, re.S | re.M)
    if block is None:
        raise ValueError("pyproject.toml: no 'test = [...]' extra under [project.optional-dependencies]")
    return re.findall(r'"([^"]+)"', block.group(1))


def requirement_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    if m is None:
        raise ValueError(f"requirement: expected 'name[spec]', got {req!r}")
    return _canonical(m.group(1))


_INSTALLED = r"""
import importlib.metadata as m, json, sys
out = {}
for d in m.distributions():
    name = d.metadata["Name"]
    if name:
        out[name] = d.version
print(json.dumps(out))
"""


def installed(python: str = sys.executable) -> dict[str, str]:
    """Every distribution ``python`` has, canonical name -> version, read by a fresh interpreter
    (this process's metadata cache would not see what pip just installed)."""
    done = subprocess.run([python, "-c", _INSTALLED], capture_output=True, text=True, check=True)
    return {_canonical(k): v for k, v in json.loads(done.stdout).items()}


def satisfied(req: str, have: dict[str, str]) -> bool:
    """Whether ``have`` (installed versions) meets ``req``: installed, and within its specifier
    when ``packaging`` can read it (pip's own copy if no other); an unreadable one counts as met."""
    name = requirement_name(req)
    if name not in have:
        return False
    try:
        from packaging.requirements import Requirement
    except ImportError:
        try:
            from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
        except ImportError:
            return True
    try:
        return Requirement(req).specifier.contains(have[name], prereleases=True)
    except Exception:  # noqa: BLE001 - a version packaging cannot parse: leave it as it is
        return True


def to_install(reqs: list[str], have: dict[str, str]) -> list[str]:
    """The test packages this environment lacks or has too old, never a package of the stack."""
    return [r for r in reqs if requirement_name(r) not in STACK and not satisfied(r, have)]


def constraints(have: dict[str, str]) -> str:
    """A pip constraints file's text pinning every kept package (``KEPT``) this environment has."""
    return "".join(f"{name}=={have[name]}\n" for name in KEPT if name in have)


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per kept package whose version is not what it was, or package of the stack that
    appeared."""
    return [
        f"{name}: {before.get(name, 'not installed')} -> {after.get(name, 'not installed')}"
        for name in KEPT
        if before.get(name) != after.get(name) and (name in before or name in STACK)
    ]


def unwritable(path: Path, what: str) -> str | None:
    """None when ``path`` can be written, else why not: fp8ref's one check of an output path
    (``fp8ref/harness/profiles/atomic.py``, standard library only), loaded from this checkout
    because fp8ref is not installed here yet."""
    import importlib.util

    where = ROOT / "fp8ref" / "harness" / "profiles" / "atomic.py"
    spec = importlib.util.spec_from_file_location("_fp8ref_atomic", where)
    assert spec is not None and spec.loader is not None
    atomic = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(atomic)
    try:
        atomic.check_writable(path, what)
    except OSError as exc:
        return str(exc)
    return None


def _pip(python: str, args: list[str]) -> None:
    print("+ pip install " + " ".join(args), flush=True)
    done = subprocess.run([python, "-m", "pip", "install", "--quiet", *args])
    if done.returncode != 0:
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/your_env.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default="fp8ref-your-env.md", help="where the report goes (default %(default)s)")
    parser.add_argument("--golden", help="a golden profile you own (pytest --fp8-golden PATH)")
    parser.add_argument("--gpu", action="store_true", help="run pytest -m gpu instead of -m cpu")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    # pytest runs in the checkout: paths are the caller's, so made absolute from here
    report = Path(args.report).expanduser().resolve()
    golden = Path(args.golden).expanduser().resolve() if args.golden else None
    # the report's path as the user gave it, checked before anything is installed or run
    problem = unwritable(Path(args.report).expanduser(), "--report")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    python = sys.executable
    before = installed(python)
    if "torch" not in before:
        print(f"error: torch is not installed for {python}: install your stack first, then run this", file=sys.stderr)
        return 2
    print(f"your stack ({python}): " + ", ".join(f"{n} {before[n]}" for n in STACK if n in before), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "your-stack.txt"
        pins.write_text(constraints(before))
        _pip(python, ["--no-deps", "-c", str(pins), "-e", str(ROOT), "--config-settings", "editable_mode=compat"])
        lacking = to_install(test_requirements(), before)
        if lacking:
            _pip(python, ["-c", str(pins), *lacking])
        else:
            print("every test package is there already", flush=True)
    moved = changed(before, installed(python))
    if moved:
        print("error: pip changed your stack (a bug in this script, please report it):", file=sys.stderr)
        for line in moved:
            print(f"  {line}", file=sys.stderr)
        return 3
    print("your stack is as it was: " + ", ".join(f"{n} {before[n]}" for n in STACK if n in before), flush=True)
    # (OPTION=PATH and --rootdir: pytest picks its root, and so whether it reads fp8ref's
    # conftest.py and knows these options, from the arguments that name existing paths)
    mark = "gpu" if args.gpu else "cpu"
    pytest_argv = [python, "-m", "pytest", f"--rootdir={ROOT}", "-m", mark, f"--fp8-report={report}"]
    if golden is not None:  # (yours must be there: a missing one fails rather than skips)
        pytest_argv += [f"--fp8-golden={golden}", "--fp8-require-golden"]
    code = subprocess.run([*pytest_argv, *args.pytest_args], cwd=ROOT).returncode
    print(f"pytest exit {code}; the report: {report}")
    return code


if __name__ == "__main__":
    sys.exit(main())
