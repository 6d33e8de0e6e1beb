"""fp8ref's pytest plugin (loaded by the root conftest.py): markers by folder, the one gating
rule, the fixtures tests share, and the end-of-run sections.

Gating: ``@pytest.mark.needs("pkg", ...)`` skips a test, naming the package and the extra that
installs it, when a package is not installed; for torchao it also skips when torchao is installed
but refuses to import with this torch (naming the versions). ``@pytest.mark.sm(N, why)`` skips on
a CUDA device below compute capability N. ``skip_unless`` (a fixture) skips a test whose subject
the install refuses. Nothing else skips.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from fp8ref.harness import install, probes

ROOT = Path(__file__).resolve().parent.parent
_FOLDER_MARKS = {("tests", "cpu"): [pytest.mark.cpu], ("tests", "gpu"): [pytest.mark.gpu],
                 ("tests", "meta"): [pytest.mark.cpu, pytest.mark.meta]}


def pytest_report_header(config: pytest.Config) -> list[str]:
    import torch

    v = {k: (x if x is not None else "not installed") for k, x in install.versions().items()}
    lines = [f"fp8ref: python {v['python']}, torch {v['torch']}, torchao {v['torchao']}, ml_dtypes {v['ml_dtypes']}"]
    if torch.cuda.is_available():
        cap = torch.cuda.get_device_capability()
        lines.append(f"fp8ref: CUDA {torch.version.cuda}, {torch.cuda.get_device_name()} (sm{cap[0]}{cap[1]})")
    else:
        lines.append(f"fp8ref: CUDA not available (torch built with CUDA {torch.version.cuda})")
    lines.append(f"fp8ref: --fp8-slow={'on' if config.getoption('--fp8-slow') else 'off'}, "
                 f"--fp8-dry-run={'on' if config.getoption('--fp8-dry-run') else 'off'}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = config.getoption("--fp8-slow")
    for item in items:
        try:
            folder = item.path.resolve().relative_to(ROOT).parts[:2]
        except ValueError:  # a test file outside the repository (given on the command line)
            folder = ()
        for mark in _FOLDER_MARKS.get(folder, ()):
            item.add_marker(mark)
        if item.get_closest_marker("slow") and not slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --fp8-slow"))
    if not hasattr(config, "workerinput"):
        # One process: the tests that read a process run beside them go last (a stable sort, so
        # pytest-randomly's order holds otherwise).
        items.sort(key=_reads_a_process)


@pytest.hookimpl(tryfirst=True)  # before fixtures: a skipped test builds none
def pytest_runtest_setup(item: pytest.Item) -> None:
    unmet = _unmet_needs(item)
    if unmet is not None:
        pytest.skip(unmet)
    _gate_capability(item)


def _gate_capability(item: pytest.Item) -> None:
    """``@pytest.mark.sm(90, "why")``: skip on a CUDA device below that compute capability,
    naming the device; ``only=True``: on any other capability. Without CUDA the gpu_device
    fixture decides (skip, or CPU dry run)."""
    mark = item.get_closest_marker("sm")
    if mark is None:
        return
    import torch

    if not torch.cuda.is_available():
        return
    need = mark.args[0]
    why = mark.args[1] if len(mark.args) > 1 else ""
    major, minor = torch.cuda.get_device_capability()
    have = major * 10 + minor
    if mark.kwargs.get("only") and have != need:
        pytest.skip(f"needs sm{need} exactly ({why}); this device: {torch.cuda.get_device_name()} (sm{have})")
    if have < need:
        pytest.skip(f"needs sm{need}+ ({why}); this device: {torch.cuda.get_device_name()} (sm{have})")


@pytest.fixture(scope="session")
def skip_unless():
    """``skip_unless(answer, what)``: skip this test when ``answer`` (from ``fp8ref.harness.install``: None
    when the install can, else ``missing: ...`` / ``refused: ...``) says the install cannot do
    ``what``, naming the torch and torchao versions and the install's own words.

    Ask only about the test's *subject*, before exercising it: the answer comes from a minimal,
    known-good call, so a test whose own call fails where the minimal one runs still fails, and
    no wrong number can turn into a skip."""

    def check(answer: str | None, what: str) -> None:
        if answer is not None:
            pytest.skip(f"{install.versions_line()} cannot do {what}: {answer}")

    return check


@pytest.fixture(scope="session")
def dry_run(request: pytest.FixtureRequest) -> bool:
    """True when gpu tests run on the CPU device (--fp8-dry-run without a GPU): tiny sizes, no speed asserts."""
    import torch

    return bool(request.config.getoption("--fp8-dry-run")) and not torch.cuda.is_available()


@pytest.fixture(scope="session")
def speed_asserts(request: pytest.FixtureRequest, dry_run: bool) -> bool:
    return not dry_run and not request.config.getoption("--fp8-no-speed-asserts")


@pytest.fixture(scope="session")
def gpu_device(request: pytest.FixtureRequest) -> str:
    """The device gpu tests run on: "cuda", or "cpu" under --fp8-dry-run; otherwise skip."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if request.config.getoption("--fp8-dry-run"):
        return "cpu"
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False); "
                "--fp8-dry-run runs this test on the CPU instead")


@pytest.fixture(scope="session")
def cpu_profile() -> dict:
    """This install's behaviour profile on the CPU (``fp8ref.harness.profile.collect("cpu")``), collected
    once per run (per worker under pytest-xdist): the golden test and the profile tools' tests read
    it. Work on a ``copy.deepcopy`` to change it."""
    from fp8ref.harness.profile import collect

    return collect("cpu")


# --- processes that run beside the tests ------------------------------------------------------------
# Some checks need a process of their own: the tiny preset's bf16-vs-FP8 comparison (four trainings,
# the suite's largest single cost, read by tests/cpu/test_finetune.py) and the checks of a fresh
# interpreter or of ``python -m fp8ref`` as a command (a test module's ``run_beside(folder)``: name ->
# argv, or (argv, Popen keywords); its tests read them through the ``beside`` fixture).
# In a one-process run they all start as soon as collection shows which are needed, one after
# another on one core (the comparison first, on one thread), while the tests go on with the other
# cores; the tests that read them run last. Under pytest-xdist the workers share the cores already:
# a module's processes start together when its first test asks, and the first worker that needs
# the comparison trains it in-process on one thread, sharing the JSON through the run's temporary
# folder (pytest-xdist's recipe for a once-per-session fixture). One thread in both cases, so the
# numbers are the same with and without -n on 2 cores.
_LANE_KEY = pytest.StashKey[object]()
_STARTED_KEY = pytest.StashKey[dict]()
_COMPARISON = "finetune tiny"
_FINETUNE_CODE = ("import json, sys, torch; torch.set_num_threads(1); "
                  "from fp8ref.finetune import FinetuneConfig, compare; "
                  "json.dump(compare(FinetuneConfig(preset='tiny')), sys.stdout)")


def _reads_a_process(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return "finetune_tiny" in names or "beside" in names


def _unmet_needs(item: pytest.Item, importing: bool = True) -> str | None:
    """Why the ``needs`` marks skip ``item``, or None. ``importing=False`` only asks whether the
    packages are installed (torchao's import check costs seconds)."""
    for mark in item.iter_markers("needs"):
        for pkg in mark.args:
            if not install.has_package(pkg):
                return install.needs_package(pkg, "this test")
            refusal = probes.torchao_float8() if pkg == "torchao" and importing else None
            if refusal is not None:
                return f"{install.versions_line()} cannot import torchao.float8: {refusal}"
    return None


def _module_processes(module, folder: Path) -> dict[str, tuple[list[str], dict]]:
    """``module.run_beside(folder)`` as name -> (argv, Popen keywords)."""
    return {name: job if isinstance(job, tuple) else (job, {}) for name, job in module.run_beside(folder).items()}


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    readers = [item for item in session.items if _reads_a_process(item) and not item.get_closest_marker("skip")
               and _unmet_needs(item, importing=False) is None]
    if not readers:
        return
    import torch

    from tests.processes import Lane, python_code

    modules = {item.module.__name__: item.module for item in readers if "beside" in item.fixturenames}
    state = _Beside(Lane(), torch.get_num_threads(), set(modules))
    config.stash[_LANE_KEY] = state
    if any("finetune_tiny" in item.fixturenames for item in readers):
        state.lane.submit(_COMPARISON, python_code(_FINETUNE_CODE))
    for name, module in modules.items():
        folder = config._tmp_path_factory.mktemp(name.rsplit(".", 1)[-1])
        try:
            jobs = _module_processes(module, folder)
        except Exception as exc:  # the module's tests fail, naming it; the others run
            state.errors[name] = exc
            continue
        for job, (argv, kwargs) in jobs.items():
            state.lane.submit(f"{name}:{job}", argv, **kwargs)
    torch.set_num_threads(max(1, state.threads - 1))  # the lane's core


@dataclasses.dataclass
class _Beside:
    lane: object  # tests.processes.Lane
    threads: int  # torch's threads before the lane took a core
    modules: set  # the modules whose run_beside processes run in the lane
    errors: dict = dataclasses.field(default_factory=dict)  # module -> what its run_beside raised

    def restore_threads(self) -> None:
        """All the lane's processes have ended: its core is the tests' again."""
        if self.threads and self.lane.idle():
            import torch

            torch.set_num_threads(self.threads)
            self.threads = 0


def pytest_runtest_teardown(item: pytest.Item) -> None:
    state = item.config.stash.get(_LANE_KEY, None)
    if state is not None:
        state.restore_threads()


def _from_the_lane(config: pytest.Config, name: str):
    state = config.stash[_LANE_KEY]
    done = state.lane.result(name)
    state.restore_threads()
    return done


@pytest.fixture
def beside(request: pytest.FixtureRequest):
    """``beside(name)``: the ``subprocess.CompletedProcess`` of this module's
    ``run_beside(folder)[name]``, run beside the tests (above)."""
    config, module = request.config, request.module
    state = config.stash.get(_LANE_KEY, None)
    if state is not None and module.__name__ in state.errors:
        pytest.fail(f"{module.__name__}.run_beside raised {state.errors[module.__name__]!r}")
    if state is not None and module.__name__ in state.modules:
        return lambda name: _from_the_lane(config, f"{module.__name__}:{name}")
    started = config.stash.setdefault(_STARTED_KEY, {})
    if module.__name__ not in started:  # xdist, or a module the collection did not foresee
        from tests.processes import Started

        folder = request.getfixturevalue("tmp_path_factory").mktemp(module.__name__.rsplit(".", 1)[-1])
        started[module.__name__] = Started(_module_processes(module, folder))
    return started[module.__name__].result


@pytest.fixture(scope="session")
def finetune_tiny(request: pytest.FixtureRequest, tmp_path_factory) -> dict:
    """``compare(FinetuneConfig(preset="tiny"))`` trained on one thread, as its JSON reads back."""
    config = request.config
    state = config.stash.get(_LANE_KEY, None)
    if state is not None and _COMPARISON in state.lane:
        done = _from_the_lane(config, _COMPARISON)
        if done.returncode != 0:
            pytest.fail(f"the fine-tune comparison failed in its process:\n{done.stderr[-4000:]}")
        return json.loads(done.stdout)
    from fp8ref.finetune import FinetuneConfig, compare
    from fp8ref.harness.install import one_thread

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


# --- what a run observed: kept per run, printed at its end --------------------------------------
_REPORTS_KEY = pytest.StashKey[list]()
_OBSERVED_KEY = pytest.StashKey[dict]()
_THROUGHPUT_KEY = pytest.StashKey[list]()


def pytest_configure(config: pytest.Config) -> None:
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if hasattr(config, "workerinput") and workers:
        # an xdist worker: its share of the cores, so N workers x torch's default threads do not
        # oversubscribe them (OpenMP threads that spin while waiting then slow everything down)
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))
    config.stash[_REPORTS_KEY] = []
    config.stash[_OBSERVED_KEY] = {}
    config.stash[_THROUGHPUT_KEY] = []


@pytest.fixture
def record_throughput(request: pytest.FixtureRequest):
    """Keep a throughput row (dict with a 'name') for the end-of-session table."""
    return request.config.stash[_THROUGHPUT_KEY].append


@pytest.fixture
def record_observation(request: pytest.FixtureRequest):
    """Note an implementation-defined outcome (key -> value) for the end-of-session summary."""
    def record(key: str, value) -> None:
        request.config.stash[_OBSERVED_KEY][key] = value
    return record


@pytest.fixture
def record_cast_report(request: pytest.FixtureRequest):
    """Keep a conformance.CastReport for the end-of-session summary."""
    return request.config.stash[_REPORTS_KEY].append


# --- pytest-xdist: each worker hands its sections to the controller, which prints them ---------
_WORKER_KEY = "fp8ref_sections"


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_LANE_KEY, None)
    if state is not None:  # what still runs when a run ends early (-x, a failed fixture)
        state.lane.close()
    for started in config.stash.get(_STARTED_KEY, {}).values():
        started.close()
    if hasattr(config, "workerinput"):  # an xdist worker
        config.workeroutput[_WORKER_KEY] = json.dumps({
            "observed": config.stash[_OBSERVED_KEY],
            "throughput": config.stash[_THROUGHPUT_KEY],
            "reports": [dataclasses.asdict(r) for r in config.stash[_REPORTS_KEY]],
        }, default=str)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist's controller: merge a finished worker's sections into its own."""
    data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if not data:
        return
    from fp8ref.harness.conformance import CastReport

    sections = json.loads(data)
    config = node.config
    config.stash[_OBSERVED_KEY].update(sections["observed"])
    config.stash[_THROUGHPUT_KEY].extend(sections["throughput"])
    config.stash[_REPORTS_KEY].extend(CastReport(**r) for r in sections["reports"])


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    observed = config.stash.get(_OBSERVED_KEY, {})
    if observed:
        terminalreporter.section("FP8 behaviour observed on this install")
        for key in sorted(observed):
            terminalreporter.write_line(f"{key}: {observed[key]}")
    rows = config.stash.get(_THROUGHPUT_KEY, [])
    if rows:
        terminalreporter.section("FP8 throughput (same-run ratios)")
        for r in sorted(rows, key=lambda r: r["name"]):  # one order whichever process ran them
            extra = "  ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items() if k != "name"
            )
            terminalreporter.write_line(f"{r['name']}: {extra}")
    reports = config.stash.get(_REPORTS_KEY, [])
    if reports:
        from fp8ref.harness.conformance import summarize_reports

        terminalreporter.section("FP8 cast conformance (observed on this install)")
        for line in summarize_reports(reports):
            terminalreporter.write_line(line)
