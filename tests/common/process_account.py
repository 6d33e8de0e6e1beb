"""Every process the tests start, with its wall and CPU time: what ``--fp8-durations``
(tests/plugins/durations.py) lists as the processes beside the run.

While an account is open, ``subprocess.Popen`` is a subclass that reaps its child with
``os.wait4`` (the child's CPU time, with that of the children it waited for: the gloo ranks of
the FSDP2 script count to it), so ``subprocess.run``, ``tests/common/beside.py``'s queue and any
other caller through the ``subprocess`` module are measured alike. ``labelled(name)`` names the
processes a thread starts (the queue's job names); others are named after the test that started
them, else their command line. A child reaped some other way (``poll()``) keeps its wall time and
reads its CPU time as unknown (None): the account degrades, it never fails a run."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Process", "ProcessAccount", "labelled"]

_local = threading.local()
# the accounts open now, innermost last: a process is recorded by the innermost alone (the fake
# suite a test of the account runs opens its own inside the run's; its processes are not the run's)
_OPEN: list[ProcessAccount] = []


@contextlib.contextmanager
def labelled(name: str) -> Iterator[None]:
    """The processes this thread starts inside the block are named ``name`` in the account."""
    before = getattr(_local, "label", None)
    _local.label = name
    try:
        yield
    finally:
        _local.label = before


@dataclasses.dataclass
class Process:
    """One process: ``name`` (its label, else the test that started it, else its argv),
    ``started`` (seconds since the account opened), ``wall`` and ``cpu`` (user + system, its
    waited-for children included; None when not reaped through the account), ``code``."""

    name: str
    started: float
    wall: float | None = None
    cpu: float | None = None
    code: int | None = None


class ProcessAccount:
    """Open: ``subprocess.Popen`` measures every child (``open()``, ``close()``);
    ``processes``: what ran, in the order started; ``test``: the test running now (the
    plugin sets it), which names a process started without a label."""

    def __init__(self) -> None:
        self.processes: list[Process] = []
        self.test: str | None = None
        self._origin = time.monotonic()
        self._saved: Any = None  # subprocess's own Popen while the account is open

    def open(self) -> None:
        if self._saved is not None:
            return
        self._saved = subprocess.Popen
        subprocess.Popen = _measured(self._saved, self)  # type: ignore[misc]
        _OPEN.append(self)

    def close(self) -> None:
        if self._saved is not None:
            subprocess.Popen = self._saved  # type: ignore[misc]
            self._saved = None
            if self in _OPEN:
                _OPEN.remove(self)

    def _started(self, args: object) -> Process:
        label = getattr(_local, "label", None)
        if label is None:
            argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)  # type: ignore[call-overload]
            command = " ".join(os.path.basename(str(a)) if i < 2 else str(a) for i, a in enumerate(argv))
            command = " ".join(command.split())  # (one line: a ``-c`` program's newlines)
            label = f"{self.test}: {command[:60]}" if self.test else command[:80]
        process = Process(label, time.monotonic() - self._origin)
        self.processes.append(process)
        return process


def _measured(base: Any, account: ProcessAccount) -> Any:
    """A ``base`` (``subprocess.Popen``) that records itself in ``account`` and is reaped with
    ``os.wait4``."""

    class MeasuredPopen(base):
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            self._fp8_start = time.monotonic()
            self._fp8_record: Process | None = None
            super().__init__(args, *rest, **kwargs)  # (raises before recording when it cannot start)
            if _OPEN and _OPEN[-1] is account:  # (an account opened inside this one records it instead)
                self._fp8_record = account._started(args)

        def _try_wait(self, wait_flags: int) -> tuple[int, int]:
            # subprocess's blocking wait() ends here (CPython 3.8-3.13): wait4 reaps as waitpid
            # would, and gives the child's resource use, which waitpid throws away
            try:
                pid, status, usage = os.wait4(self.pid, wait_flags)
            except ChildProcessError:  # (SIGCHLD ignored: no status, as subprocess itself does)
                return self.pid, 0
            if pid == self.pid and self._fp8_record is not None:
                self._fp8_record.cpu = usage.ru_utime + usage.ru_stime
            return pid, status

        def _handle_exitstatus(self, *args: Any, **kwargs: Any) -> None:
            super()._handle_exitstatus(*args, **kwargs)
            if self._fp8_record is not None and self._fp8_record.wall is None:
                self._fp8_record.wall = time.monotonic() - self._fp8_start
                self._fp8_record.code = self.returncode

    return MeasuredPopen
