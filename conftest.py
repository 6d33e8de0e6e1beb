"""Suite-wide pytest configuration: the command-line options of fp8ref's own suite. What the
suite does with them lives in tests/plugins/ (one plugin per job; the hypothesis profiles and how
many examples each tier draws: tests/plugins/hypothesis_tier.py).
The options a team's suite shares (``--fp8-golden``, ``--fp8-update-golden``,
``--fp8-require-golden``, ``--fp8-report``, ``--fp8-workload``, ...) are fp8ref's pytest plugin's
(``fp8ref/pytest_plugin.py``), which pytest loads through fp8ref's entry point."""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.plugins.compile_cache",
    "tests.plugins.gating",
    "tests.plugins.fixtures",
    "tests.plugins.beside",
    "tests.plugins.summaries",
    "tests.plugins.durations",
    "tests.plugins.hypothesis_tier",
    "tests.plugins.log_capture",
    "tests.plugins.gc_tuning",
]


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # fp8ref's plugin, where its entry point did not load it (the checkout on PYTHONPATH, fp8ref not
    # installed; PYTEST_DISABLE_PLUGIN_AUTOLOAD): registered now, it adds its options too
    if pluginmanager.is_blocked("fp8ref"):
        raise pytest.UsageError(
            "-p no:fp8ref: fp8ref's own suite needs fp8ref's plugin (its golden and report options)"
        )
    if pluginmanager.get_plugin("fp8ref") is None:
        import fp8ref.pytest_plugin

        if not pluginmanager.is_registered(fp8ref.pytest_plugin):
            pluginmanager.register(fp8ref.pytest_plugin, "fp8ref")
    group = parser.getgroup("fp8ref")
    group.addoption(
        "--fp8-slow",
        action="store_true",
        default=False,
        help="run the long sweeps marked slow (the full 2^32 float32 cast sweep per format)",
    )
    group.addoption(
        "--fp8-durations",
        action="store_true",
        default=False,
        help="print the run's cost account at its end: collection and test time per folder and module, each "
        "profile family's time, every process the tests started (wall and CPU): tests/plugins/durations.py",
    )
    group.addoption(
        "--fp8-durations-md",
        default=None,
        metavar="PATH",
        help="write the cost account (--fp8-durations' table) to PATH as markdown (scripts/timings.py)",
    )
    group.addoption(
        "--fp8-strict",
        action="store_true",
        default=False,
        help="fail the run (exit 1) when the install gives any known wrong answer, although each is excused by "
        "name; the end-of-run section 'Defects of this install' lists them, most severe first",
    )
    group.addoption(
        "--fp8-dry-run",
        action="store_true",
        default=False,
        help="run the gpu tests on the CPU device at tiny sizes, so CI keeps them alive",
    )
    group.addoption(
        "--fp8-gpu-long",
        action="store_true",
        default=False,
        help="run the gpu_long tier too: the fine-tune comparison and whole-model benchmarks (minutes on a GPU)",
    )
    group.addoption(
        "--fp8-require",
        action="append",
        default=[],
        metavar="PKG[,PKG...]",
        help="a runner's guard: these packages (import names) must import, torchao with this torch too; "
        "a missing one stops the run with exit 1 instead of letting its tests skip green",
    )
    group.addoption(
        "--fp8-require-gpu",
        action="store_true",
        default=False,
        help="a GPU runner's guard: no usable CUDA GPU is an error (the run stops, exit 1), not a skip",
    )
