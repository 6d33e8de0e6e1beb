"""Command lines the tests run as processes of their own, and ``ProcessQueue``, which runs them.

Each such process pays for its own interpreter and torch import (seconds of CPU), so where several
calls check the same thing they share one interpreter (``fp8ref_main_each``, ``pytest_each``).
tests/plugins/beside.py queues them on one core beside the tests, and each test reads back the
result it asserts on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from tests.common.paths import SCRIPTS
from tests.common.process_account import labelled


def fp8ref_cli(*args: str) -> list[str]:
    """``python -m fp8ref ARGS`` with this interpreter, as CI scripts call it."""
    return [sys.executable, "-m", "fp8ref", *args]


def python_code(code: str, *args: str) -> list[str]:
    """``python -c CODE ARGS`` with this interpreter (for a line or two; longer code is a file in
    tests/scripts/)."""
    return [sys.executable, "-c", code, *args]


def script(name: str, *args: str) -> list[str]:
    """``python tests/scripts/NAME ARGS`` with this interpreter."""
    return [sys.executable, str(SCRIPTS / name), *args]


def fp8ref_main_each(calls: dict[str, list[str]]) -> list[str]:
    """A fresh interpreter that calls ``fp8ref.__main__.main`` with each argv of ``calls`` (name ->
    argv); read its report with ``main_each_report``."""
    return script("main_each.py", json.dumps(calls))


def main_each_report(done: subprocess.CompletedProcess) -> dict:
    """``{"calls": {name: [exit code, stderr, logger levels]}, "modules": [...]}``."""
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def pytest_each(runs: dict[str, dict]) -> list[str]:
    """A fresh interpreter that calls ``pytest.main`` with each run's argv in turn (name ->
    ``{"argv": [...], "cwd": folder}``, cwd optional; ``"fp8ref": True``: ``python -m fp8ref``'s
    ``main`` instead; ``"script": NAME``: tests/scripts/NAME with ``argv`` as its arguments, which
    puts back what it changes); read each run with ``pytest_each_result``."""
    return script("pytest_each.py", json.dumps(runs))


def pytest_each_result(done: subprocess.CompletedProcess, name: str) -> subprocess.CompletedProcess:
    """Run ``name`` of a ``pytest_each`` process, as a ``CompletedProcess`` of its own would read:
    pytest's exit code, and what it wrote to stdout and stderr."""
    assert done.returncode == 0, done.stderr[-2000:]
    code, out, err = json.loads(done.stdout.strip().splitlines()[-1])[name]
    return subprocess.CompletedProcess(json.loads(done.args[-1])[name]["argv"], code, out, err)


def _spawn(argv: list[str], kwargs: dict) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _completed(proc: subprocess.Popen, timeout: float | None = None) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class ProcessQueue:
    """Processes, by name, run one at a time in the order submitted, on a thread of this process,
    so that they take one core while the tests go on on the others. ``result(name)`` waits for one,
    and runs it at once on the caller's thread if it has not started yet (the caller's core would
    only wait otherwise); ``idle()`` says whether all have ended."""

    def __init__(self) -> None:
        self._jobs: dict[str, tuple[list[str], dict]] = {}
        self._done: dict[str, subprocess.CompletedProcess | Exception] = {}
        self._ended: dict[str, threading.Event] = {}
        self._queue: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._running: subprocess.Popen | None = None
        self.seconds: dict[str, float] = {}  # name -> how long its process ran (wall)
        self._thread = threading.Thread(target=self._work, name="fp8ref-beside", daemon=True)
        self._thread.start()

    def submit(self, name: str, argv: list[str], **popen_kwargs: Any) -> None:
        """Queue ``argv``; it runs in the folder and with the environment of this moment (copies):
        it may start while a test has changed them (``monkeypatch.chdir``, ``setenv``), and
        without ``env`` a child execs with the live ``environ`` array, which a library in another
        thread may reallocate with setenv at that moment (Linux vforks for Popen: seen as
        "OSError: [Errno 14] Bad address")."""
        popen_kwargs = {"cwd": os.getcwd(), "env": dict(os.environ), **popen_kwargs}
        with self._lock:
            if name in self._jobs:
                raise ValueError(f"name: {name!r} was submitted already")
            self._jobs[name] = (argv, popen_kwargs)
            self._ended[name] = threading.Event()
            self._queue.append(name)
            self._wake.notify()

    def __contains__(self, name: str) -> bool:
        return name in self._jobs

    def idle(self) -> bool:
        return all(event.is_set() for event in self._ended.values())

    def result(self, name: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        with self._lock:
            waiting = name in self._queue and not self._closed
            if waiting:  # not started: the caller runs it now, beside the queue's own
                self._queue.remove(name)
                argv, kwargs = self._jobs[name]
        if waiting:
            self._run(name, argv, kwargs, timeout)
        if not self._ended[name].wait(timeout):
            raise TimeoutError(f"{name}: not done within {timeout} s (it waits for the processes queued before it)")
        done = self._done[name]
        if isinstance(done, Exception):
            raise RuntimeError(f"{name}: could not be started: {done!r}") from done
        return done

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                name = self._queue.pop(0)
                argv, kwargs = self._jobs[name]
                started = time.monotonic()
                try:
                    with labelled(name):  # (the name --fp8-durations lists it by)
                        self._running = _spawn(argv, kwargs)
                except (OSError, ValueError) as exc:  # no such program or folder: that job's error
                    self._done[name] = exc
                    self._ended[name].set()
                    continue
            self._done[name] = _completed(self._running)
            self.seconds[name] = time.monotonic() - started
            self._ended[name].set()

    def _run(self, name: str, argv: list[str], kwargs: dict, timeout: float) -> None:
        """One job on the calling thread."""
        started = time.monotonic()
        try:
            with labelled(name):
                proc = _spawn(argv, kwargs)
            self._done[name] = _completed(proc, timeout)
            self.seconds[name] = time.monotonic() - started
        except (OSError, ValueError) as exc:
            self._done[name] = exc
        self._ended[name].set()

    def close(self) -> None:
        """Stop the running process and drop the queue (a run that ended before reading them)."""
        with self._lock:
            self._closed = True
            self._wake.notify()
            running = self._running
        if running is not None and running.poll() is None:
            running.kill()
        self._thread.join(timeout=60)
