"""Checks that need a process of their own, run beside the tests.

Some checks cannot run inside the pytest process: a fresh interpreter (what ``python -m fp8ref``
imports, its logger levels), ``python -m fp8ref`` called as CI scripts call it, pytest itself
with fp8ref's options, and the tiny fine-tune comparison (four trainings, the suite's largest
single cost, in a process so that it trains on one thread). Each such process costs seconds of
CPU, and a test that waited for one to start would leave its core idle.

To add one, give the test module a ``run_beside(folder)`` function and read the result through
the ``beside`` fixture::

    def run_beside(folder):            # folder: a temporary directory of this module's own
        return {"help": fp8ref_cli("--help"),                 # name -> argv, or
                "env": (fp8ref_cli("formats"), {"env": {...}})}  # (argv, Popen keywords)

    def test_help_exits_0(beside):
        assert beside("help").returncode == 0    # a subprocess.CompletedProcess

(``tests/common/beside.py`` has the argv builders: ``fp8ref_cli``, ``fp8ref_main_each``,
``pytest_each``, ``script``.)

How they run: one at a time, in a queue on a thread of the pytest process (``ProcessQueue``): one
core runs them while the tests go on with torch's other threads (until the session ends: see
``_Beside.start_all`` for why not when the queue is done), and the tests that read a process run
after the others (a stable sort, so pytest-randomly's order holds otherwise), by which time most
have ended. A test whose process has not started runs it at once itself (its core would only wait
otherwise). A run that runs every test it collected queues, when its first test is set up, the
comparison (first: the longest) if a collected test reads ``finetune_tiny``, then the processes of
every module with a collected test that reads one and is not skipped, longest first by how long each
ran last time (pytest's cache), and the ``pytest_each`` jobs of all those modules as one interpreter
(each pays seconds of imports; the test reads its own runs back as if they had had a process of
their own). A pytest-xdist worker does not know which modules it will be given: it queues a module's
processes when that module's first test asks, and the comparison when a test of its first asks (at
most once per worker). The same code either way; only the moment differs.

Measured (docs/timings.md): starting every process at once, at the lowest CPU priority, with
torch's threads left alone and the tests in their own order, took the run from 125 s to 210 s
on 2 cores: the tests' own CPU time doubled (torch's threads waiting on each other).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from tests.common import beside as runners
from tests.common.beside import ProcessQueue, script
from tests.common.paths import SCRIPTS
from tests.plugins.gating import unmet_needs

_COMPARISON = "finetune tiny"
_SESSION = "the session's"  # the owner of the comparison's process (no module's)
_Job = tuple[str, list[str], dict]  # queued name, argv, Popen keywords
_SHARED = "the pytest_each runs of every module"  # one interpreter for them all (_Beside)
_PYTEST_EACH = str(SCRIPTS / "pytest_each.py")
_SECONDS = "fp8ref-beside-seconds/v1"  # a key of pytest's cache: how long each process ran last time


def _fixtures(item: pytest.Item) -> tuple[str, ...]:
    return tuple(getattr(item, "fixturenames", ()))


class _Beside:
    """The run's processes in one queue, by owner (a module's name, or ``_SESSION``) and name."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self.queue = ProcessQueue()
        self._owners: set[str] = set()
        self._errors: dict[str, Exception] = {}  # module -> what its run_beside raised
        self._threads = 0  # torch's threads before the queue took a core (0: it has none)
        # a pytest_each job run in a shared interpreter -> (that interpreter's job, its own argv)
        self._shared: dict[str, tuple[str, list[str]]] = {}

    def start(self, owner: str, module: ModuleType | None = None) -> None:
        """Queue ``owner``'s processes (once)."""
        self.start_all([(owner, module)])

    def start_all(self, owners: list[tuple[str, ModuleType | None]], seconds: dict | None = None) -> None:
        """Queue the processes of each ``(owner, module)`` not queued yet, the longest first by
        ``seconds`` (name -> how long it ran last time: pytest's cache), so that the last to run
        are short ones and the tests that wait for them wait little."""
        jobs: list[_Job] = []
        for owner, module in owners:
            if owner in self._owners:
                continue
            self._owners.add(owner)
            if module is None:
                calls: dict[str, tuple[list[str], dict]] = {_COMPARISON: (script("finetune_tiny.py"), {})}
            else:
                folder = self._factory.mktemp(owner.rsplit(".", 1)[-1])
                try:
                    calls = {n: c if isinstance(c, tuple) else (c, {}) for n, c in module.run_beside(folder).items()}
                except Exception as exc:  # the module's tests fail, naming it; the others run
                    self._errors[owner] = exc
                    continue
            jobs += [(f"{owner}:{name}", argv, kwargs) for name, (argv, kwargs) in calls.items()]
        jobs = self._one_interpreter_for_pytest_each(jobs)
        known = seconds or {}
        for name, argv, kwargs in sorted(jobs, key=lambda job: -float(known.get(job[0], 0.0))):  # (a stable sort)
            self.queue.submit(name, argv, **kwargs)
        if not jobs:
            return
        if not self._threads:
            import torch

            # The queue's core, for the rest of the session: the tests keep one thread count from
            # the moment the queue starts. Inductor's FX graph cache keys a CPU graph on torch's
            # thread count (torch/_inductor/codecache.py, "cpp_runtime_thread_count"), so giving the
            # core back when the queue ran dry, a moment that varies run to run, made a warm run's
            # compiled checks miss the cache whenever they ran on the other side of it (18 s of
            # recompiles in test_torchao_linear.py: docs/timings.md).
            self._threads = torch.get_num_threads()
            torch.set_num_threads(max(1, self._threads - 1))

    def _one_interpreter_for_pytest_each(
        self, jobs: list[tuple[str, list[str], dict]]
    ) -> list[tuple[str, list[str], dict]]:
        """The ``pytest_each`` jobs of several modules as one: each pays seconds of imports, which
        one interpreter pays once. The run marked ``"first"`` goes first, then the others that call
        ``python -m fp8ref`` (a fresh interpreter's import noise lands in the first, whose test
        looks for it: tests/cpu/tools/test_cli_exit_codes.py), whatever order the modules came in."""
        each = [job for job in jobs if job[1][1:2] == [_PYTEST_EACH] and not job[2]]
        if len(each) < 2:
            return jobs
        runs = {f"{name}|{run}": spec for name, argv, _ in each for run, spec in json.loads(argv[-1]).items()}
        first = sorted(runs, key=lambda run: (not runs[run].get("first"), not runs[run].get("fp8ref"), run))
        shared = _SHARED if not self._shared else f"{_SHARED} ({len(self._shared)})"  # (a later batch's: its own)
        for name, argv, _ in each:
            self._shared[name] = (shared, argv)
        merged = runners.pytest_each({run: runs[run] for run in first})
        return [job for job in jobs if job not in each] + [(shared, merged, {})]

    def result(self, owner: str, name: str, module: ModuleType | None = None) -> subprocess.CompletedProcess:
        self.start(owner, module)
        if owner in self._errors:
            pytest.fail(f"{owner}.run_beside raised {self._errors[owner]!r}")
        job = f"{owner}:{name}"
        if job in self._shared:  # its runs, read out of the shared interpreter's report
            shared_job, argv = self._shared[job]
            shared = self.queue.result(shared_job)
            report = json.loads(shared.stdout.strip().splitlines()[-1]) if shared.returncode == 0 else {}
            mine = {k.split("|", 1)[1]: v for k, v in report.items() if k.split("|", 1)[0] == job}
            return subprocess.CompletedProcess(argv, shared.returncode, json.dumps(mine) + "\n", shared.stderr)
        return self.queue.result(job)

    def restore_threads(self) -> None:
        """The session is over: torch's threads as they were before the queue took a core."""
        if self._threads:
            import torch

            torch.set_num_threads(self._threads)
            self._threads = 0

    def close(self) -> None:
        """Stop what still runs (a run that ended early: -x, a failed fixture)."""
        self.queue.close()
        self.restore_threads()


_KEY = pytest.StashKey[_Beside]()


def _reads_a_process(item: pytest.Item) -> bool:
    names = _fixtures(item)
    return "finetune_tiny" in names or "beside" in names


@pytest.fixture(scope="session", autouse=True)
def _processes_beside(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Beside]:
    config = request.config
    processes = config.stash[_KEY] = _Beside(tmp_path_factory)
    cache = getattr(config, "cache", None)  # (None under -p no:cacheprovider)
    if not hasattr(config, "workerinput"):  # not a pytest-xdist worker: it runs what it collected
        readers = [
            item
            for item in request.session.items
            if _reads_a_process(item)
            and not item.get_closest_marker("skip")
            and unmet_needs(item, importing=False) is None
        ]
        owners: list[tuple[str, ModuleType | None]] = []
        if any("finetune_tiny" in _fixtures(item) for item in readers):
            owners.append((_SESSION, None))
        for item in readers:
            if "beside" in _fixtures(item):
                module = getattr(item, "module")  # noqa: B009 - a Function item's
                owners.append((module.__name__, module))
        processes.start_all(owners, cache.get(_SECONDS, {}) if cache is not None else {})
    yield processes
    processes.close()
    if cache is not None and processes.queue.seconds:
        cache.set(_SECONDS, {**cache.get(_SECONDS, {}), **processes.queue.seconds})


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the tests that read a process go last (a stable sort: pytest-randomly's order holds otherwise)
    items.sort(key=_reads_a_process)


@pytest.fixture
def beside(request: pytest.FixtureRequest, _processes_beside: _Beside) -> Callable[[str], subprocess.CompletedProcess]:
    """``beside(name)``: the ``subprocess.CompletedProcess`` of this module's
    ``run_beside(folder)[name]``, run beside the tests (above)."""
    module = request.module
    return lambda name: _processes_beside.result(module.__name__, name, module)


@pytest.fixture(scope="session")
def finetune_tiny(_processes_beside: _Beside) -> dict:
    """``compare(FinetuneConfig(preset="tiny"))`` trained on one thread (tests/scripts/finetune_tiny.py),
    as its JSON reads back."""
    done = _processes_beside.result(_SESSION, _COMPARISON)
    if done.returncode != 0:
        pytest.fail(f"the fine-tune comparison failed in its process:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def pytest_configure(config: pytest.Config) -> None:
    import os

    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if hasattr(config, "workerinput") and workers:
        # an xdist worker: its share of the cores, so N workers x torch's default threads do not
        # oversubscribe them (OpenMP threads that spin while waiting then slow everything down)
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))
