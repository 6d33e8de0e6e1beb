"""A team's own workloads as ``pkg.module:function`` targets (the pytest plugin's
``--fp8-workload``): each traced once per process and folder, within a time limit, and keyed in
the team's golden as the shipped workloads are (``profile_keys``): ``workload.<target>`` (each run
of characters other than letters, digits, ``_``, ``-``, ``+`` and ``:`` in the target made one
``_``: ``mypkg.train:step`` is ``workload.mypkg_train:step``), valued ``N calls, digest D`` (with
its violations), its trace's lines beside it, from which the upgrade report names the first call
where two runs part and its line in the team's code (``fp8ref.harness.trace.divergence``).

The time limit (``time_limit``) is a ``SIGALRM`` timer: it stops a workload that runs past it
with ``WorkloadTimeout``, on POSIX and in the main thread only (elsewhere the workload runs
unlimited), and only when the interpreter next runs Python code: a call stuck inside one C or CUDA
call (a kernel, a deadlock below Python) is stopped when it returns, if ever. While it runs it
takes ``SIGALRM`` over; a timer set before (pytest-timeout's ``signal`` method) is set again
after, less the time the workload took.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from ..trace import Trace, trace
from ..trace.target import TargetError, key_part, load_target

__all__ = ["WorkloadTimeout", "time_limit", "traced_target", "key_of_target", "target_keys", "forget"]


class WorkloadTimeout(BaseException):
    """A workload ran past its time limit. A ``BaseException``, as ``KeyboardInterrupt`` is: a
    team's ``except Exception`` around its step must not swallow the stop."""


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Raise ``WorkloadTimeout`` (naming ``what`` and the limit) in the block when it runs past
    ``seconds``; None or 0: no limit. See the module's docstring for where it cannot stop one."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not seconds or not usable:
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise WorkloadTimeout(f"{what}: stopped after {seconds:g} s (--fp8-workload-timeout), not finished")

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, stop)
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # (another user's timer, running when the workload started)
            left = max(outer - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


# (target, folder) -> its trace, or what running it raised: each target runs once per process and
# folder, for its own test item and the golden alike
_OUTCOMES: dict[tuple[str, str], Trace | BaseException] = {}


def traced_target(target: str, folder: str | os.PathLike[str] | None = None, timeout: float | None = None) -> Trace:
    """The trace of ``target``'s function (imported with ``folder``, default the current one,
    first on ``sys.path``: ``load_target``), run once per process and folder within ``timeout``
    seconds. ``TargetError`` names a target that is not there; what the function raised, or
    ``WorkloadTimeout``, is raised again on each call."""
    where = os.fspath(folder) if folder is not None else os.getcwd()
    key = (target, where)
    if key not in _OUTCOMES:
        fn = load_target(target, where)  # (TargetError: not kept, the caller's to say)
        try:
            with time_limit(timeout, f"--fp8-workload {target}"):
                _OUTCOMES[key] = trace(fn)
        except (Exception, WorkloadTimeout) as exc:  # (KeyboardInterrupt, SystemExit: the run's own)
            _OUTCOMES[key] = exc
    got = _OUTCOMES[key]
    if isinstance(got, BaseException):
        raise got
    return got


def forget() -> None:
    """Forget the traces kept: the next ``traced_target`` runs each function again (a second
    ``pytest.main`` in one process)."""
    _OUTCOMES.clear()


def key_of_target(target: str) -> str:
    """``workload.<target>`` as a profile key (``key_part``)."""
    return f"workload.{key_part(target)}"


def target_keys(
    targets: tuple[str, ...] | list[str], folder: str | os.PathLike[str] | None = None, timeout: float | None = None
) -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    """The targets' keys, their traces' lines and the targets that gave no trace (target -> why):
    a target that raised or ran past ``timeout`` is keyed ``fails: <what it raised>``."""
    from .profile_keys import value

    keys: dict[str, str] = {}
    lines: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    whose: dict[str, str] = {}
    for target in dict.fromkeys(targets):
        key = key_of_target(target)
        if key in whose:
            raise TargetError(f"the targets {whose[key]!r} and {target!r} give one key, {key}: rename one")
        whose[key] = target
        try:
            got = traced_target(target, folder, timeout)
        except TargetError:
            raise
        except (Exception, WorkloadTimeout) as exc:
            words = str(exc).splitlines()[0] if str(exc) else ""
            failed[target] = f"{type(exc).__name__}: {words}"
            keys[key] = f"fails: {failed[target]}"
            continue
        keys[key] = value(got)
        lines[key] = got.pinned()
    return keys, lines, failed
