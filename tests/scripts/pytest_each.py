"""``pytest.main(argv)`` for each named run in turn, in this one interpreter (torch, fp8ref and the
plugins imported once, not once a run), or ``python -m fp8ref``'s ``main(argv)`` for a run with
``"fp8ref": true``, or a script of tests/scripts/ for a run with ``"script": NAME`` (``argv``: its
arguments; it runs as ``__main__``, and must leave the interpreter as it found it: the runs after
it share it). A run's ``"env"`` is set for the whole interpreter before it imports anything (an
offline hub, one thread): runs that want different values of one variable cannot share one. Then
one JSON line: each run's exit code and what it wrote to the file descriptors 1 and 2 (as a
process of its own would have: C code's output too).

Usage: python tests/scripts/pytest_each.py '{"name": {"argv": [...], "cwd": "FOLDER"}, ...}'
"""

import json
import os
import runpy
import sys
import tempfile
import traceback
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
RUNS = json.loads(sys.argv[1])
wanted: dict[str, tuple[str, str]] = {}  # variable -> (value, the run that wants it)
for run_name, spec in RUNS.items():
    for variable, value in spec.get("env", {}).items():
        if wanted.setdefault(variable, (value, run_name))[0] != value:
            first, other = wanted[variable][1], wanted[variable][0]
            sys.exit(f"env: run {run_name!r} wants {variable}={value!r}, run {first!r} {variable}={other!r}")
os.environ.update({variable: value for variable, (value, _) in wanted.items()})

import pytest  # noqa: E402 - after the environment its runs share


def _script(name: str, argv: list[str]) -> int:
    """``python tests/scripts/NAME ARGV``'s exit code, run in this interpreter."""
    path = str(Path(__file__).parent / name)  # (a path of its own elsewhere: as it is)
    saved_argv, saved_path, saved_bytecode = sys.argv, list(sys.path), sys.dont_write_bytecode
    before = set(sys.modules)
    sys.argv = [path, *argv]  # (sys.path[0] is this folder already, as ``python PATH`` sets it)
    try:
        runpy.run_path(path, run_name="__main__")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # (its traceback on its stderr, exit 1, as a process of its own)
        traceback.print_exc()
        return 1
    finally:
        # its own modules (from the folders it, or a pytest run of it, put on sys.path) go, so that
        # a later run that names the same module imports its own; the checkout's stay (pytest puts
        # the checkout on sys.path for a test of it, and the checkout's fp8ref and tests are the
        # same code in every run: dropped, they would be imported twice, the modules imported
        # before this run keeping the first copies)
        added = [Path(p).resolve() for p in sys.path if p and p not in saved_path]
        for module in [m for m in sys.modules if m not in before]:
            file = getattr(sys.modules[module], "__file__", None)
            where = Path(file).resolve().parents if file else ()
            if CHECKOUT not in where and any(folder in where for folder in added):
                del sys.modules[module]
        sys.argv, sys.path[:], sys.dont_write_bytecode = saved_argv, saved_path, saved_bytecode


def _fp8ref(argv: list[str]) -> int:
    from fp8ref.__main__ import main

    try:
        return int(main(argv))
    except SystemExit as exc:  # (--help, argparse's usage errors: that run's exit, not this interpreter's)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


runs: dict[str, list] = {}
here = os.getcwd()
for name, run in RUNS.items():
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            os.chdir(run.get("cwd", here))
            if run.get("script"):
                code = _script(run["script"], run["argv"])
            elif run.get("fp8ref"):
                code = _fp8ref(run["argv"])
            else:
                code = int(pytest.main(run["argv"]))
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            os.chdir(here)
        out.seek(0), err.seek(0)
        runs[name] = [code, out.read().decode(errors="replace"), err.read().decode(errors="replace")]
print(json.dumps(runs))
