"""Suite-wide pytest configuration: the command-line options and the hypothesis profiles.
What the suite does with them lives in tests/plugins/ (one plugin per job)."""

from __future__ import annotations

import os

import pytest

pytest_plugins = [
    "tests.plugins.compile_cache",
    "tests.plugins.gating",
    "tests.plugins.fixtures",
    "tests.plugins.beside",
    "tests.plugins.summaries",
]

# --- hypothesis profiles -------------------------------------------------------------------
try:
    from hypothesis import HealthCheck, settings

    # ci: the same examples every run (derandomized), nothing stored between runs, no deadline
    # (the shared 2-core machines are too noisy for per-example time limits).
    settings.register_profile(
        "ci",
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=200,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # dev: random examples, a local example database, still no deadline.
    settings.register_profile("dev", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
    # thorough: a deeper search for counterexamples, run by hand (--hypothesis-profile thorough).
    settings.register_profile(
        "thorough", deadline=None, max_examples=3000, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile(os.environ.get("FP8REF_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
except ImportError:  # tests that use hypothesis skip through the needs marker
    pass


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fp8ref")
    group.addoption(
        "--fp8-slow",
        action="store_true",
        default=False,
        help="run the long sweeps marked slow (the full 2^32 float32 cast sweep per format)",
    )
    group.addoption(
        "--fp8-update-golden",
        action="store_true",
        default=False,
        help="re-pin tests/golden/<device kind>.json (or --fp8-golden PATH) from this install "
        "(on purpose; say why in the commit)",
    )
    group.addoption(
        "--fp8-golden",
        default=None,
        metavar="PATH",
        help="hold this install to the golden profile at PATH, one you own (a .json file, or a folder of "
        "<device kind>.json files), instead of fp8ref's tests/golden; with --fp8-update-golden, pin it there "
        "(whole or not at all). NAME-installs.json beside NAME.json names the differences accepted, with why",
    )
    group.addoption(
        "--fp8-require-golden",
        action="store_true",
        default=False,
        help="a missing golden (fp8ref's own, or --fp8-golden's PATH) fails the golden test instead of skipping: "
        "for CI that must not go green without the comparison",
    )
    group.addoption(
        "--fp8-report",
        default=None,
        metavar="PATH",
        help="write the upgrade report to PATH at the end of the run: the golden's differences grouped by "
        "family with their meaning, consequence and severity, then the end-of-run sections "
        "(Markdown; JSON when PATH ends in .json)",
    )
    group.addoption(
        "--fp8-report-format",
        choices=["full", "summary"],
        default="full",
        help="--fp8-report's Markdown: full (every differing key, default) or summary (counts and the most serious "
        "keys per family, the golden comparison under 60,000 characters: a pull-request comment)",
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
