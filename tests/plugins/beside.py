"""Checks that need a process of their own, run beside the tests.

Some checks cannot run inside the pytest process: a fresh interpreter (what ``python -m fp8ref``
imports, its logger levels), ``python -m fp8ref`` called as CI scripts call it, and the tiny
fine-tune comparison (four trainings, the suite's largest single cost). Each such process costs
seconds of CPU before it does anything, and a test that waited for it would leave its core idle.

To add one, give the test module a ``run_beside(folder)`` function and read the result through
the ``beside`` fixture::

    def run_beside(folder):            # folder: a temporary directory of this module's own
        return {"help": fp8ref_cli("--help"),                 # name -> argv, or
                "env": (fp8ref_cli("formats"), {"env": {...}})}  # (argv, Popen keywords)

    def test_help_exits_0(beside):
        assert beside("help").returncode == 0    # a subprocess.CompletedProcess

(``tests/common/beside.py`` has the argv builders: ``fp8ref_cli``, ``fp8ref_main_each``, ``script``.)

How they run: in a one-process run, every process the collected tests need starts when
collection ends, one after another on one core (the comparison first, on one thread), while the
tests go on with the other cores; the tests that read them run last. Under pytest-xdist the
workers share the cores already: a module's processes start together when its first test asks,
and the first worker that needs the comparison trains it in-process on one thread, sharing the
JSON through the run's temporary folder (pytest-xdist's recipe for a once-per-session fixture).
One thread in both cases, so the numbers are the same with and without -n on 2 cores.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.common.beside import OneAfterAnother
from tests.plugins.gating import unmet_needs

_QUEUE_KEY = pytest.StashKey["_Beside"]()
_ALL_AT_ONCE_KEY = pytest.StashKey[dict]()
_COMPARISON = "finetune tiny"


def _fixtures(item: pytest.Item) -> tuple[str, ...]:
    return tuple(getattr(item, "fixturenames", ()))


def _reads_a_process(item: pytest.Item) -> bool:
    names = _fixtures(item)
    return "finetune_tiny" in names or "beside" in names


def _module_processes(module: Any, folder: Path) -> dict[str, tuple[list[str], dict]]:
    """``module.run_beside(folder)`` as name -> (argv, Popen keywords)."""
    return {name: job if isinstance(job, tuple) else (job, {}) for name, job in module.run_beside(folder).items()}


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    readers = [
        item
        for item in session.items
        if _reads_a_process(item) and not item.get_closest_marker("skip") and unmet_needs(item, importing=False) is None
    ]
    if not readers:
        return
    import torch

    from tests.common.beside import script

    modules = {m.__name__: m for item in readers if "beside" in _fixtures(item) for m in [getattr(item, "module")]}  # noqa: B009 - a Function item's
    state = _Beside(OneAfterAnother(), torch.get_num_threads(), set(modules))
    config.stash[_QUEUE_KEY] = state
    if any("finetune_tiny" in _fixtures(item) for item in readers):
        state.queue.submit(_COMPARISON, script("finetune_tiny.py"))
    for name, module in modules.items():
        factory = getattr(config, "_tmp_path_factory")  # noqa: B009 - the tmp_path_factory fixture's object
        folder = factory.mktemp(name.rsplit(".", 1)[-1])
        try:
            jobs = _module_processes(module, folder)
        except Exception as exc:  # the module's tests fail, naming it; the others run
            state.errors[name] = exc
            continue
        for job, (argv, kwargs) in jobs.items():
            state.queue.submit(f"{name}:{job}", argv, **kwargs)
    torch.set_num_threads(max(1, state.threads - 1))  # the queue's core


@dataclasses.dataclass
class _Beside:
    queue: OneAfterAnother
    threads: int  # torch's threads before the queue took a core
    modules: set  # the modules whose run_beside processes run in the queue
    errors: dict = dataclasses.field(default_factory=dict)  # module -> what its run_beside raised

    def restore_threads(self) -> None:
        """All the queue's processes have ended: its core is the tests' again."""
        if self.threads and self.queue.idle():
            import torch

            torch.set_num_threads(self.threads)
            self.threads = 0


def pytest_runtest_teardown(item: pytest.Item) -> None:
    state = item.config.stash.get(_QUEUE_KEY, None)
    if state is not None:
        state.restore_threads()


def _from_the_queue(config: pytest.Config, name: str) -> subprocess.CompletedProcess:
    state = config.stash[_QUEUE_KEY]
    done = state.queue.result(name)
    state.restore_threads()
    return done


@pytest.fixture
def beside(request: pytest.FixtureRequest) -> Callable[[str], subprocess.CompletedProcess]:
    """``beside(name)``: the ``subprocess.CompletedProcess`` of this module's
    ``run_beside(folder)[name]``, run beside the tests (above)."""
    config, module = request.config, request.module
    state = config.stash.get(_QUEUE_KEY, None)
    if state is not None and module.__name__ in state.errors:
        pytest.fail(f"{module.__name__}.run_beside raised {state.errors[module.__name__]!r}")
    if state is not None and module.__name__ in state.modules:
        return lambda name: _from_the_queue(config, f"{module.__name__}:{name}")
    started = config.stash.setdefault(_ALL_AT_ONCE_KEY, {})
    if module.__name__ not in started:  # xdist, or a module the collection did not foresee
        from tests.common.beside import AllAtOnce

        folder = request.getfixturevalue("tmp_path_factory").mktemp(module.__name__.rsplit(".", 1)[-1])
        started[module.__name__] = AllAtOnce(_module_processes(module, folder))
    return started[module.__name__].result


@pytest.fixture(scope="session")
def finetune_tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``compare(FinetuneConfig(preset="tiny"))`` trained on one thread, as its JSON reads back."""
    config = request.config
    state = config.stash.get(_QUEUE_KEY, None)
    if state is not None and _COMPARISON in state.queue:
        done = _from_the_queue(config, _COMPARISON)
        if done.returncode != 0:
            pytest.fail(f"the fine-tune comparison failed in its process:\n{done.stderr[-4000:]}")
        return json.loads(done.stdout)
    from fp8ref.finetune import FinetuneConfig, compare
    from fp8ref.harness.stack.install import one_thread

    def train() -> str:
        with one_thread():
            return json.dumps(compare(FinetuneConfig(preset="tiny")))

    if not hasattr(config, "workerinput"):
        return json.loads(train())
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / "finetune-tiny.json"
    with FileLock(f"{shared}.lock"):
        if not shared.is_file():
            shared.write_text(train())
        return json.loads(shared.read_text())


def pytest_configure(config: pytest.Config) -> None:
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if hasattr(config, "workerinput") and workers:
        # an xdist worker: its share of the cores, so N workers x torch's default threads do not
        # oversubscribe them (OpenMP threads that spin while waiting then slow everything down)
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):
        # One process: the tests that read a process run beside them go last (a stable sort, so
        # pytest-randomly's order holds otherwise).
        items.sort(key=_reads_a_process)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_QUEUE_KEY, None)
    if state is not None:  # what still runs when a run ends early (-x, a failed fixture)
        state.queue.close()
    for started in config.stash.get(_ALL_AT_ONCE_KEY, {}).values():
        started.close()
