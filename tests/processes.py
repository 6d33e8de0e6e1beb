"""Command lines a test module runs as processes of their own, started together.

Each such process pays for its own interpreter and torch import (about 2 s of CPU); started one
after another they were, after training, the CPU suite's largest cost. Started together they
share the cores, and each test reads back the result it asserts on."""

from __future__ import annotations

import json
import subprocess
import sys


def fp8ref_cli(*args: str) -> list[str]:
    """``python -m fp8ref ARGS`` with this interpreter, as CI scripts call it."""
    return [sys.executable, "-m", "fp8ref", *args]


def python_code(code: str, *args: str) -> list[str]:
    """``python -c CODE ARGS`` with this interpreter."""
    return [sys.executable, "-c", code, *args]


# ``main(argv)`` for each named argv in turn, in one fresh interpreter; then one JSON line: each
# call's exit code (a SystemExit's too, as from --help) and stderr, the modules the process
# imported, and the levels of the loggers the CLI quiets.
_MAIN_EACH = """
import contextlib, io, json, logging, sys
from fp8ref.__main__ import _IMPORT_NOISE, main
calls = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    calls[name] = [code, err.getvalue()]
print(json.dumps({"calls": calls, "modules": sorted(sys.modules),
                  "levels": [logging.getLogger(n).level for n in _IMPORT_NOISE]}))
"""


def fp8ref_main_each(calls: dict[str, list[str]]) -> list[str]:
    """A fresh interpreter that calls ``fp8ref.__main__.main`` with each argv of ``calls`` (name ->
    argv); read its report with ``main_each_report``."""
    return python_code(_MAIN_EACH, json.dumps(calls))


def main_each_report(done: subprocess.CompletedProcess) -> dict:
    """``{"calls": {name: [exit code, stderr]}, "modules": [...], "levels": [...]}``."""
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class Started:
    """``calls`` (name -> argv) running side by side; ``result(name)`` waits for one."""

    def __init__(self, calls: dict[str, list[str]], **popen_kwargs) -> None:
        self._procs = {name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                              **popen_kwargs)
                       for name, argv in calls.items()}
        self._done: dict[str, subprocess.CompletedProcess] = {}

    def result(self, name: str, timeout: float = 300) -> subprocess.CompletedProcess:
        if name not in self._done:
            proc = self._procs[name]
            out, err = proc.communicate(timeout=timeout)
            self._done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        return self._done[name]

    def close(self) -> None:
        """Stop whatever still runs (a test that failed before reading its result)."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
