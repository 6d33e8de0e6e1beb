"""Suite-wide pytest configuration: options, markers by folder, package gating, hypothesis
profiles, the report header and the cast-conformance summary."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parent

# --- hypothesis profiles -------------------------------------------------------------------
try:
    from hypothesis import HealthCheck, settings

    # ci: the same examples every run (derandomized), nothing stored between runs, no deadline
    # (the shared 2-core machines are too noisy for per-example time limits).
    settings.register_profile(
        "ci", derandomize=True, deadline=None, database=None, max_examples=200,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # dev: random examples, a local example database, still no deadline.
    settings.register_profile("dev", deadline=None, max_examples=200,
                              suppress_health_check=[HealthCheck.too_slow])
    # thorough: a deeper search for counterexamples, run by hand (--hypothesis-profile thorough).
    settings.register_profile("thorough", deadline=None, max_examples=3000,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("FP8REF_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
except ImportError:  # hypothesis tests are skipped by the needs marker
    pass


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fp8ref")
    group.addoption("--fp8-slow", action="store_true", default=False,
                    help="run the long sweeps marked slow (the full 2^32 float32 cast sweep per format)")
    group.addoption("--fp8-update-golden", action="store_true", default=False,
                    help="re-pin tests/golden/<device kind>.json from this install (on purpose; say why in the commit)")
    group.addoption("--fp8-no-speed-asserts", action="store_true", default=False,
                    help="gpu benchmarks: report throughput ratios but assert none of them")
    group.addoption("--fp8-dry-run", action="store_true", default=False,
                    help="run the gpu tests on the CPU device at tiny sizes, so CI keeps them alive")


def _has(pkg: str) -> bool:
    return importlib.util.find_spec(pkg) is not None


def pytest_report_header(config: pytest.Config) -> list[str]:
    from fp8ref.install import versions

    v = {k: (x if x is not None else "not installed") for k, x in versions().items()}
    lines = [f"fp8ref: python {v['python']}, torch {v['torch']}, torchao {v['torchao']}, ml_dtypes {v['ml_dtypes']}"]
    try:
        import torch

        if torch.cuda.is_available():
            cap = torch.cuda.get_device_capability()
            lines.append(f"fp8ref: CUDA {torch.version.cuda}, {torch.cuda.get_device_name()} (sm{cap[0]}{cap[1]})")
        else:
            lines.append(f"fp8ref: CUDA not available (torch built with CUDA {torch.version.cuda})")
    except Exception as exc:  # noqa: BLE001
        lines.append(f"fp8ref: torch unavailable ({exc})")
    lines.append(f"fp8ref: --fp8-slow={'on' if config.getoption('--fp8-slow') else 'off'}, "
                 f"--fp8-dry-run={'on' if config.getoption('--fp8-dry-run') else 'off'}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = config.getoption("--fp8-slow")
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT).parts
        if parts[:2] == ("tests", "cpu"):
            item.add_marker(pytest.mark.cpu)
        elif parts[:2] == ("tests", "gpu"):
            item.add_marker(pytest.mark.gpu)
        if item.get_closest_marker("slow") and not slow:
            item.add_marker(pytest.mark.skip(reason="slow sweep: run with --fp8-slow"))
        _gate_capability(item)
        needed = [p for mark in item.iter_markers("needs") for p in mark.args]
        if item.get_closest_marker("torchao"):
            needed.append("torchao")
        missing = sorted({p for p in needed if not _has(p)})
        if missing:
            item.add_marker(pytest.mark.skip(
                reason=f"needs package(s) {', '.join(missing)}, not installed (pip install -e '.[test]')"))


def _gate_capability(item: pytest.Item) -> None:
    """``@pytest.mark.sm(90, "why")``: skip on a CUDA device below that compute capability,
    naming the device. Without CUDA the gpu_device fixture decides (skip, or CPU dry run)."""
    mark = item.get_closest_marker("sm")
    if mark is None:
        return
    import torch

    if not torch.cuda.is_available():
        return
    need = mark.args[0]
    why = mark.args[1] if len(mark.args) > 1 else ""
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor < need:
        item.add_marker(pytest.mark.skip(
            reason=f"needs sm{need}+ ({why}); this device: {torch.cuda.get_device_name()} (sm{major}{minor})"))


@pytest.fixture(scope="session")
def skip_unless():
    """``skip_unless(answer, what)``: skip this test when ``answer`` (from ``fp8ref.install``: None
    when the install can, else ``missing: ...`` / ``refused: ...``) says the install cannot do
    ``what``, naming the torch and torchao versions and the install's own words.

    Ask only about the test's *subject*, before exercising it: the answer comes from a minimal,
    known-good call, so a test whose own call fails where the minimal one runs still fails, and
    no wrong number can turn into a skip."""
    from fp8ref.install import versions_line

    def check(answer: "str | None", what: str) -> None:
        if answer is not None:
            pytest.skip(f"{versions_line()} cannot do {what}: {answer}")

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


# --- the cast-conformance summary ------------------------------------------------------------
_REPORTS_KEY = pytest.StashKey[list]()
_OBSERVED_KEY = pytest.StashKey[dict]()
_THROUGHPUT_KEY = pytest.StashKey[list]()


def pytest_configure(config: pytest.Config) -> None:
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


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    observed = config.stash.get(_OBSERVED_KEY, {})
    if observed:
        terminalreporter.section("FP8 behaviour observed on this install")
        for key in sorted(observed):
            terminalreporter.write_line(f"{key}: {observed[key]}")
    rows = config.stash.get(_THROUGHPUT_KEY, [])
    if rows:
        terminalreporter.section("FP8 throughput (same-run ratios)")
        for r in rows:
            extra = "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items() if k != "name")
            terminalreporter.write_line(f"{r['name']}: {extra}")
    reports = config.stash.get(_REPORTS_KEY, [])
    if reports:
        from fp8ref.conformance import summarize_reports

        terminalreporter.section("FP8 cast conformance (observed on this install)")
        for line in summarize_reports(reports):
            terminalreporter.write_line(line)
