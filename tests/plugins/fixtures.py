"""The fixtures tests share: ``skip_unless`` (skip when the install refuses a test's subject), the
device gpu tests run on (a GPU, or the CPU under ``--fp8-dry-run``), and this install's profile."""

from __future__ import annotations

import pytest

from fp8ref.harness import install


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
    pytest.skip(
        "needs a CUDA GPU (torch.cuda.is_available() is False); --fp8-dry-run runs this test on the CPU instead"
    )


@pytest.fixture(scope="session")
def cpu_profile() -> dict:
    """This install's behaviour profile on the CPU (``fp8ref.harness.profile.collect("cpu")``), collected
    once per run (per worker under pytest-xdist): the golden test and the profile tools' tests read
    it. Work on a ``copy.deepcopy`` to change it."""
    from fp8ref.harness.profile import collect

    return collect("cpu")
