"""The fixtures tests share: ``skip_if_refused`` (skip when the install refuses a test's subject), the
device gpu tests run on (a GPU, or the CPU under ``--fp8-dry-run``), and this install's profile."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path

import pytest

from fp8ref.harness.stack import install
from fp8ref.harness.stack.refusals import NOT_MEASURED
from fp8ref.pytest_golden import SUITE_GOLDEN, golden_option
from tests.common.paths import GOLDEN, ROOT


@pytest.fixture(scope="session")
def skip_if_refused():
    """``skip_if_refused(refusal, what)``: skip this test when ``refusal`` (a probe's answer, from
    ``fp8ref.harness.stack.probes``: None when the install can, else ``missing: ...`` /
    ``refused: ...``) says the install cannot do ``what``, naming the torch and torchao versions
    and the install's own words; when ``refusal`` is None, do nothing.

    Ask only about the test's *subject*, before exercising it: the answer comes from a minimal,
    known-good call, so a test whose own call fails where the minimal one runs still fails, and
    no wrong number can turn into a skip."""

    def check(refusal: str | None, what: str) -> None:
        if refusal is not None and refusal.startswith(NOT_MEASURED):  # (fp8ref's own package missing: no refusal)
            pytest.skip(f"{what}: needs package {refusal.split('fp8ref needs ', 1)[-1]}")
        if refusal is not None:
            pytest.skip(f"{install.versions_line()} cannot do {what}: {refusal}")

    return check


@pytest.fixture(scope="session")
def dry_run(request: pytest.FixtureRequest) -> bool:
    """True when gpu tests run on the CPU device (--fp8-dry-run without a GPU): tiny sizes, no speed asserts."""
    import torch

    return bool(request.config.getoption("--fp8-dry-run")) and not torch.cuda.is_available()


def no_usable_gpu() -> str | None:
    """None when a CUDA GPU runs a kernel here; else why not, in words (no CUDA in this torch
    build, no device visible, or a first kernel that fails: a broken driver or runtime)."""
    import torch

    if not torch.cuda.is_available():
        return f"torch.cuda.is_available() is False (torch {torch.__version__}, CUDA build {torch.version.cuda})"
    try:
        torch.ones(8, device="cuda").add_(1).sum().item()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any failure of the first kernel means no usable GPU
        return f"a first CUDA kernel fails: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def missing_required(packages: list[str]) -> list[str]:
    """For ``--fp8-require``: one line per named package that does not import here (torchao: that
    does not import with this torch; transformers: whose fine-grained FP8 module does not import,
    so that every transformers FP8 check would skip), empty when all do. ``packages`` may hold
    comma lists."""
    from fp8ref.harness.hf import transformers_fp8
    from fp8ref.harness.stack import probes

    names = [n.strip() for item in packages for n in item.split(",") if n.strip()]
    lines = []
    for name in names:
        if name == "torchao":
            refusal = probes.torchao_float8_refusal()
            if refusal is not None:
                lines.append(f"torchao: {refusal}")
        elif name == "transformers":
            refusal = transformers_fp8.finegrained_refusal()
            if refusal is not None:
                lines.append(f"transformers: {refusal}")
        elif not install.has_package(name):
            lines.append(f"{name}: not installed")
        else:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - installed but broken is missing for a runner
                lines.append(f"{name}: does not import ({type(exc).__name__}: {exc})")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    """--fp8-require-gpu: a runner whose CUDA is missing or broken stops at once, exit 1, rather
    than skipping every GPU test and passing. --fp8-require=PKG,...: likewise for packages the
    runner must have (without torchao every Float8Linear check would skip green)."""
    missing = missing_required(session.config.getoption("--fp8-require"))
    if missing:
        pytest.exit("--fp8-require: " + "; ".join(missing), returncode=pytest.ExitCode.TESTS_FAILED)
    if session.config.getoption("--fp8-require-gpu"):
        problem = no_usable_gpu()
        if problem is not None:
            pytest.exit(f"--fp8-require-gpu: no usable CUDA GPU: {problem}", returncode=pytest.ExitCode.TESTS_FAILED)


@pytest.fixture(scope="session")
def gpu_device(request: pytest.FixtureRequest) -> str:
    """The device gpu tests run on: "cuda", or "cpu" under --fp8-dry-run; otherwise skip (fail
    under --fp8-require-gpu)."""
    problem = no_usable_gpu()
    if problem is None:
        return "cuda"
    if request.config.getoption("--fp8-require-gpu"):
        pytest.fail(f"--fp8-require-gpu: no usable CUDA GPU: {problem}")
    if request.config.getoption("--fp8-dry-run"):
        return "cpu"
    pytest.skip(f"needs a CUDA GPU ({problem}); --fp8-dry-run runs this test on the CPU instead")


@pytest.fixture
def full_float32():
    """TF32 off for the test, restored after: for torchao layers that emulate FP8 by float32
    matmuls of the dequantized operands (``emulate=True``), compared bit for bit with each other
    or within a bound that assumes float32 products. (TF32 exists on CUDA only: on the CPU this
    changes nothing.)"""
    from fp8ref.reference.emulate import full_float32_matmuls

    with full_float32_matmuls():
        yield


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    """The device of a test parametrized by ``tests.common.params.on_devices``: "cpu" for its cpu
    case, ``gpu_device``'s answer for its cuda case."""
    case = getattr(request, "param", None)
    if case not in ("cpu", "cuda"):
        raise pytest.UsageError(f"{request.node.nodeid}: parametrize 'device' with tests.common.params.on_devices")
    return "cpu" if case == "cpu" else request.getfixturevalue("gpu_device")


@dataclasses.dataclass(frozen=True)
class Golden:
    """Where the golden tests look: ``--fp8-golden PATH`` (``owned``: the user's own file or
    folder) or fp8ref's ``tests/golden``."""

    where: Path
    owned: bool

    def how_to_pin(self, test: str) -> str:
        """The command that pins this golden from the install, on purpose, as it works pasted in
        any folder: the test (``test``: its path in the checkout) by its absolute path, from which
        pytest finds fp8ref's root folder and options, and ``--fp8-golden=PATH`` absolute and
        written with ``=`` (README: pytest picks its root from the arguments that name paths)."""
        import shlex

        from tests.common.paths import ROOT

        option = " " + shlex.quote(f"--fp8-golden={self.where.absolute()}") if self.owned else ""
        return f"pytest {shlex.quote(str(ROOT / test))}{option} --fp8-update-golden"


@pytest.fixture(scope="session")
def golden(request: pytest.FixtureRequest) -> Golden:
    """The golden the golden tests hold this install to (``Golden``)."""
    path = golden_option(request.config)
    return Golden(path, True) if path is not None else Golden(GOLDEN, False)


@pytest.fixture(scope="session")
def with_team_targets(request: pytest.FixtureRequest) -> Callable[[dict], dict]:
    """``with_team_targets(profile)``: ``profile`` with the keys of the run's ``--fp8-workload`` and
    ``--fp8-claims`` targets (fp8ref's pytest plugin: ``pytest_golden.with_team_targets``) when
    the golden is a team's own (``--fp8-golden``); fp8ref's own goldens hold no team's targets."""
    from fp8ref.pytest_golden import with_team_targets

    config = request.config
    if golden_option(config) is None or not (config.getoption("--fp8-workload") or config.getoption("--fp8-claims")):
        return lambda profile: profile
    return lambda profile: with_team_targets(config, profile)


@pytest.fixture(scope="session")
def cpu_profile() -> dict:
    """This install's behaviour profile on the CPU (``fp8ref.harness.profiles.profile.collect("cpu")``), collected
    once per run (per worker under pytest-xdist): the golden test and the profile tools' tests read
    it. Work on a ``copy.deepcopy`` to change it."""
    from fp8ref.harness.profiles.profile import collect

    return collect("cpu")


def graph_breaks() -> dict[str, int]:
    """The graph breaks dynamo counted since ``torch._dynamo.utils.counters`` was last cleared:
    reason (its first line) -> count."""
    from torch._dynamo.utils import counters

    return {str(reason).splitlines()[0]: n for reason, n in counters["graph_break"].items()}


def fail_on_graph_breaks() -> None:
    """Fail the test (pytest.fail) when dynamo counted a graph break since its counters were
    cleared, naming each: what ``fresh_dynamo`` does at the end of a compiling test."""
    breaks = graph_breaks()
    if breaks:
        pytest.fail(
            "the compiled code broke its graph, so part of it ran eagerly: "
            + "; ".join(f"{reason} (x{n})" for reason, n in breaks.items())
        )


@pytest.fixture
def fresh_dynamo():
    """For a test that compiles: dynamo's caches emptied before it (so what it compiles does not
    depend on which tests ran first), shapes kept static (no recompiling with dynamic shapes after
    a second shape), hitting the recompile limit an error instead of a silent fall-back to eager
    under a 'compiled' label, and any graph break an error at the end of the test: a "compiled"
    result that ran partly eager is not the compiled path. Restored afterwards."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    config = torch._dynamo.config
    wanted = {"fail_on_recompile_limit_hit": True, "automatic_dynamic_shapes": False}
    torch._dynamo.reset()
    counters.clear()
    with config.patch(**{k: v for k, v in wanted.items() if hasattr(config, k)}):
        yield
    try:
        fail_on_graph_breaks()
    finally:
        torch._dynamo.reset()
        counters.clear()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # this suite's golden tests compare the golden (tests/golden, or --fp8-golden's): fp8ref's
    # plugin adds no golden item of its own, and --fp8-update-golden alone pins tests/golden
    config.stash[SUITE_GOLDEN] = GOLDEN
    golden_option(config)  # (a usage error stops the run before it collects)


# the golden tests, by their path in the checkout: the device each compares on (None: the GPU test's)
_GOLDEN_TESTS = {"tests/cpu/tools/test_golden_profile.py": "cpu", "tests/gpu/test_golden_profile.py": None}


def _golden_test_device(config: pytest.Config, test: str) -> str | None:
    """The device a golden test collected will compare on, as ``gpu_device`` will choose it; None
    when it will skip (no usable GPU, no --fp8-dry-run)."""
    device = _GOLDEN_TESTS[test]
    if device is not None:
        return device
    if no_usable_gpu() is None:
        return "cuda"
    return "cpu" if config.getoption("--fp8-dry-run") else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A golden of another device kind than a golden test collected compares on is a usage error
    before any test runs: found after the profile (a minute, several on a GPU), it read as a
    difference (exit 1)."""
    from fp8ref.harness.profiles.golden import golden_of_another_device

    where = golden_option(config) or GOLDEN
    tests = {item.path.relative_to(ROOT).as_posix() for item in items if item.path.is_relative_to(ROOT)}
    for test in sorted(tests & set(_GOLDEN_TESTS)):
        device = _golden_test_device(config, test)
        wrong = golden_of_another_device(where, device) if device is not None else None
        if wrong is not None:
            raise pytest.UsageError(f"--fp8-golden: {wrong} ({test} compares on {device})")
