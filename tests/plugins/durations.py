"""``--fp8-durations``: the run's cost account, printed at its end (``--fp8-durations-md=PATH``
writes the same markdown to PATH; ``scripts/timings.py`` puts it into docs/timings.md).

What it counts (tests/common/cost_account.py renders it): each test module's collection and each
test's setup, call and teardown, grouped by folder; each profile family's time in every profile
collected in this process (``Family.probes`` wrapped: its import, ``collect`` and ``traces``); and
every process the tests start, wall and CPU (tests/common/process_account.py); and the graphs
each test had inductor compile or load from its FX graph cache (on a warm rerun of the same tests,
a test that compiles had its cache key move or tried a compile that failed). Off, it changes
nothing. Under pytest-xdist the controller sees every test's durations but only its own
processes and profiles (the workers' are not counted), and no compiles (said so)."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.common.cost_account import CompileCounter, Run, render
from tests.common.process_account import ProcessAccount

_KEY = pytest.StashKey["_Account"]()
_TITLE = "The default tier's cost (--fp8-durations)"


class _Account:
    def __init__(self) -> None:
        self.run = Run()
        self.processes = ProcessAccount()
        self.started = time.monotonic()
        self.load = os.getloadavg()[0]
        self.rusage = (_cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN))
        self.compiles = CompileCounter()
        self.compiles.step(*_inductor_counts())  # (what this process compiled before the run is not its)
        self._probes: Any = None

    def open(self) -> None:
        from fp8ref.harness.profiles import families

        self.processes.open()
        self._probes = families.Family.probes
        original, sink = self._probes, self.run.profile

        def probes(family: families.Family) -> Any:
            started = time.perf_counter()  # (the room's first import counts to its family)
            module = original(family)
            sink.append((family.name, time.perf_counter() - started))
            return _TimedProbes(module, family.name, sink)

        families.Family.probes = probes  # type: ignore[method-assign, assignment]

    def close(self) -> None:
        from fp8ref.harness.profiles import families

        self.processes.close()
        if self._probes is not None:
            families.Family.probes = self._probes  # type: ignore[method-assign]
            self._probes = None

    def finish(self) -> Run:
        run = self.run
        run.wall = time.monotonic() - self.started
        run.cpu = (
            _cpu(resource.RUSAGE_SELF) - self.rusage[0],
            _cpu(resource.RUSAGE_CHILDREN) - self.rusage[1],
        )
        run.load = (self.load, os.getloadavg()[0])
        run.processes = [(p.name, p.started, p.wall, p.cpu, p.code) for p in self.processes.processes]
        import torch

        run.versions = f"torch {torch.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
        return run


class _TimedProbes:
    """A family's ``profile_keys`` module whose ``collect`` and ``traces`` add their seconds to
    the family's last entry in ``sink``."""

    def __init__(self, module: Any, family: str, sink: list[tuple[str, float]]) -> None:
        self._module, self._family, self._sink = module, family, sink

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name not in ("collect", "traces"):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                last = max(i for i, (f, _) in enumerate(self._sink) if f == self._family)
                self._sink[last] = (self._family, self._sink[last][1] + time.perf_counter() - started)

        return timed


# inductor's names for its FX graph cache's outcomes (torch/_inductor/codecache.py, torch 2.13 and
# 2.14): a graph compiled (the cache missed, or could not be used) or loaded from the cache
COMPILED = ("fxgraph_cache_miss", "fxgraph_cache_bypass")
LOADED = ("fxgraph_cache_hit",)


def _inductor_counts() -> tuple[tuple[int, int], object]:
    """Inductor's running counts in this process, (graphs compiled, graphs loaded), and the object
    holding them (a new one after ``counters.clear()``); zeros before anything imported dynamo
    (never imported here: that import alone takes a second)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    inductor = counters.get("inductor") if counters is not None else None
    if not inductor:
        return (0, 0), inductor
    return (sum(inductor.get(k, 0) for k in COMPILED), sum(inductor.get(k, 0) for k in LOADED)), inductor


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _wanted(config: pytest.Config) -> bool:
    return bool(config.getoption("--fp8-durations") or config.getoption("--fp8-durations-md"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # asked for only (off, no hook of the account runs); a pytest-xdist worker's share is the
    # controller's to count (its tests' reports reach the controller)
    if _wanted(config) and not hasattr(config, "workerinput"):
        account = config.stash[_KEY] = _Account()
        account.open()
        config.pluginmanager.register(_Hooks(account, config), "fp8ref-durations")


def pytest_unconfigure(config: pytest.Config) -> None:
    account = config.stash.get(_KEY, None)
    if account is not None:
        account.close()


class _Hooks:
    """The account's hooks, registered only when it is asked for."""

    def __init__(self, account: _Account, config: pytest.Config) -> None:
        self.account, self.config = account, config

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        started = time.perf_counter()
        report = yield
        if isinstance(collector, pytest.Module):
            self.account.run.collections.append((_nodeid(self.config, collector.path), time.perf_counter() - started))
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        self.account.processes.test = item.nodeid  # (names the processes this test starts)
        try:
            return (yield)
        finally:
            self.account.processes.test = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when in ("setup", "call", "teardown"):
            self.account.run.phases.append((report.nodeid, report.when, report.duration))
            compiled, loaded = self.account.compiles.step(*_inductor_counts())
            if (compiled or loaded) and self.account.run.compiles is not None:
                self.account.run.compiles.append((report.nodeid, compiled, loaded))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        run = self.account.finish()
        if self.config.pluginmanager.hasplugin("dsession"):  # (pytest-xdist's controller: workers compile)
            run.compiles = None
        table = render(run)
        if self.config.getoption("--fp8-durations"):
            terminalreporter.section(_TITLE)
            terminalreporter.write(table)
        path = self.config.getoption("--fp8-durations-md")
        if path:
            Path(path).write_text(table)
            terminalreporter.write_line(f"fp8ref: the cost account written to {path}")


def _nodeid(config: pytest.Config, path: Path) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return path.as_posix()
