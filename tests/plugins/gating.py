"""Which tests run: markers applied by folder (but to a test that carries its own cpu or gpu
mark: the two cases of a test parametrized by device), and the one gating rule.

``@pytest.mark.needs("pkg", ...)`` skips a test, naming the package and the extra that installs
it, when a package is not installed; for torchao it also skips when torchao is installed but
refuses to import with this torch (naming the versions). ``@pytest.mark.sm(N, why)`` skips on a
CUDA device below compute capability N. ``slow`` skips without ``--fp8-slow``. The
``skip_if_refused`` fixture (tests/plugins/fixtures.py) skips a test whose subject the install
refuses. Nothing else skips.
"""

from __future__ import annotations

import pytest

from fp8ref.harness.stack import install, probes
from tests.common.paths import ROOT

_FOLDER_MARKS = {
    ("tests", "cpu"): [pytest.mark.cpu],
    ("tests", "gpu"): [pytest.mark.gpu],
    ("tests", "meta"): [pytest.mark.cpu, pytest.mark.meta],
}


def pytest_report_header(config: pytest.Config) -> list[str]:
    import torch

    v = {k: (x if x is not None else "not installed") for k, x in install.versions().items()}
    lines = [f"fp8ref: python {v['python']}, torch {v['torch']}, torchao {v['torchao']}, ml_dtypes {v['ml_dtypes']}"]
    if torch.cuda.is_available():
        cap = torch.cuda.get_device_capability()
        lines.append(f"fp8ref: CUDA {torch.version.cuda}, {torch.cuda.get_device_name()} (sm{cap[0]}{cap[1]})")
    else:
        lines.append(f"fp8ref: CUDA not available (torch built with CUDA {torch.version.cuda})")
    lines.append(
        f"fp8ref: --fp8-slow={'on' if config.getoption('--fp8-slow') else 'off'}, "
        f"--fp8-dry-run={'on' if config.getoption('--fp8-dry-run') else 'off'}"
    )
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = config.getoption("--fp8-slow")
    long_gpu = config.getoption("--fp8-gpu-long") or _dry_run_on_cpu(config)
    for item in items:
        try:
            top, sub, *_ = item.path.resolve().relative_to(ROOT).parts
            folder = (top, sub)
        except ValueError:  # a test file outside the repository (given on the command line)
            folder = ("", "")
        # a test parametrized by device (tests.common.params.on_devices) carries its own cpu or gpu mark
        own = item.get_closest_marker("cpu") or item.get_closest_marker("gpu")
        for mark in () if own else _FOLDER_MARKS.get(folder, ()):
            item.add_marker(mark)
        if item.get_closest_marker("slow") and not slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --fp8-slow"))
        if item.get_closest_marker("gpu_long") and not long_gpu:
            item.add_marker(pytest.mark.skip(reason="gpu_long: minutes on a GPU; run with --fp8-gpu-long"))


def _dry_run_on_cpu(config: pytest.Config) -> bool:
    """--fp8-dry-run without CUDA: every gpu test runs at tiny sizes, the gpu_long tier too (so CI
    keeps it alive)."""
    if not config.getoption("--fp8-dry-run"):
        return False
    import torch

    return not torch.cuda.is_available()


# packages that import torchao themselves when it is installed (transformers' quantizers do)
_IMPORTS_TORCHAO = {"torchao", "transformers"}


def unmet_needs(item: pytest.Item, importing: bool = True) -> str | None:
    """Why the ``needs`` marks skip ``item``, or None. ``importing=False`` only asks whether the
    packages are installed (torchao's import check costs seconds)."""
    for mark in item.iter_markers("needs"):
        for pkg in mark.args:
            if not install.has_package(pkg):
                return install.needs_package(pkg, "this test")
            if not importing or pkg not in _IMPORTS_TORCHAO or not install.has_package("torchao"):
                continue
            refusal = probes.torchao_float8_refusal()
            if refusal is None:
                continue
            if pkg == "torchao":
                return f"{install.versions_line()} cannot import torchao.float8: {refusal}"
            # a package that imports an installed torchao itself fails with it
            return f"{pkg} imports torchao, which {install.versions_line()} cannot import: {refusal}"
    return None


def unmet_torchao() -> str | None:
    """Why a test that needs torchao skips here (``needs("torchao")``'s words), or None: for a
    test that needs it only sometimes (the golden test holding fp8ref's own golden)."""
    if not install.has_package("torchao"):
        return install.needs_package("torchao", "this test")
    refusal = probes.torchao_float8_refusal()
    return None if refusal is None else f"{install.versions_line()} cannot import torchao.float8: {refusal}"


@pytest.hookimpl(tryfirst=True)  # before fixtures: a skipped test builds none
def pytest_runtest_setup(item: pytest.Item) -> None:
    unmet = unmet_needs(item)
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
