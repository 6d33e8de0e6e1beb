"""Command lines a test module runs as processes of their own, started together.

Each such process pays for its own interpreter and torch import (about 2 s of CPU); started one
after another they were, after training, the CPU suite's largest cost. Started together they
share the cores, and each test reads back the result it asserts on."""

from __future__ import annotations

import subprocess
import sys


def fp8ref_cli(*args: str) -> list[str]:
    """``python -m fp8ref ARGS`` with this interpreter, as CI scripts call it."""
    return [sys.executable, "-m", "fp8ref", *args]


def python_code(code: str, *args: str) -> list[str]:
    """``python -c CODE ARGS`` with this interpreter."""
    return [sys.executable, "-c", code, *args]


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
