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

from fp8ref import install

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
        # One process: the tests that read the fine-tune comparison go last (a stable sort, so
        # pytest-randomly's order holds otherwise), and the comparison trains beside the others.
        items.sort(key=_reads_the_comparison)


@pytest.hookimpl(tryfirst=True)  # before fixtures: a skipped test builds none
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        for pkg in mark.args:
            if not install.has_package(pkg):
                pytest.skip(install.needs_package(pkg, "this test"))
            refusal = install.torchao_float8() if pkg == "torchao" else None
            if refusal is not None:
                pytest.skip(f"{install.versions_line()} cannot import torchao.float8: {refusal}")
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
    """``skip_unless(answer, what)``: skip this test when ``answer`` (from ``fp8ref.install``: None
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
    """This install's behaviour profile on the CPU (``fp8ref.profile.collect("cpu")``), collected
    once per run (per worker under pytest-xdist): the golden test and the profile tools' tests read
    it. Work on a ``copy.deepcopy`` to change it."""
    from fp8ref.profile import collect

    return collect("cpu")


# --- the fine-tune comparison, trained beside the other tests -------------------------------------
# The tiny preset's bf16-vs-FP8 comparison (four trainings, the suite's largest single cost) that
# tests/cpu/test_finetune.py reads. In a one-process run it trains in a process of its own on one
# thread, started as soon as the collected tests show one needs it, while the run goes on with the
# others on the remaining cores; under pytest-xdist the first worker that needs it trains it and
# shares the JSON through the run's temporary folder (pytest-xdist's recipe for a once-per-session
# fixture). One thread in both cases, so the numbers are the same with and without -n on 2 cores.
_FINETUNE_KEY = pytest.StashKey[object]()
_FINETUNE_CODE = ("import json, sys, torch; torch.set_num_threads(1); "
                  "from fp8ref.finetune import FinetuneConfig, compare; "
                  "json.dump(compare(FinetuneConfig(preset='tiny')), sys.stdout)")


def _reads_the_comparison(item: pytest.Item) -> bool:
    return "finetune_tiny" in getattr(item, "fixturenames", ())


def _finetune_in_background(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.processes import Started, python_code

    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    if not any(map(_reads_the_comparison, items)):
        return
    if not all(install.has_package(p) for p in ("transformers", "datasets", "torchao")):
        return  # its tests skip, naming the package
    import torch

    config.stash[_FINETUNE_KEY] = (Started({"tiny": python_code(_FINETUNE_CODE)}), torch.get_num_threads())
    torch.set_num_threads(max(1, torch.get_num_threads() - 1))  # its core


def pytest_collection_finish(session: pytest.Session) -> None:
    _finetune_in_background(session.config, session.items)


@pytest.fixture(scope="session")
def finetune_tiny(request: pytest.FixtureRequest, tmp_path_factory) -> dict:
    """``compare(FinetuneConfig(preset="tiny"))`` trained on one thread, as its JSON reads back."""
    config = request.config
    background = config.stash.get(_FINETUNE_KEY, None)
    if background is not None:
        import torch

        started, threads = background
        done = started.result("tiny", timeout=1800)
        torch.set_num_threads(threads)
        if done.returncode != 0:
            pytest.fail(f"the fine-tune comparison failed in its process:\n{done.stderr[-4000:]}")
        return json.loads(done.stdout)
    from fp8ref.finetune import FinetuneConfig, compare
    from fp8ref.install import one_thread

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
    background = config.stash.get(_FINETUNE_KEY, None)
    if background is not None:  # a run that ended before any test read it (-x, a deselection)
        background[0].close()
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
    from fp8ref.conformance import CastReport

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
        from fp8ref.conformance import summarize_reports

        terminalreporter.section("FP8 cast conformance (observed on this install)")
        for line in summarize_reports(reports):
            terminalreporter.write_line(line)
