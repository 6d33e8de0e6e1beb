"""The hypothesis profiles, and how many examples each tier draws.

Profiles: ``ci`` (derandomized: the same examples every run, no example database, no deadline: the
shared 2-core machines are too noisy for per-example time limits; the default when ``CI`` is set),
``dev`` (random examples and a local example database; the default otherwise) and ``thorough``
(3,000 examples, by hand). ``ci`` and ``dev`` draw 200 examples a property under ``--fp8-slow``
(which CI runs); the default tier draws 50 of the same properties (``<profile>-default-tier``, in
the run's header), so every property is still asserted there, on fewer inputs: the hypothesis
properties were 5 s of the default tier's minute on 2 cores (docs/timings.md). A profile named
(``--hypothesis-profile`` or ``FP8REF_HYPOTHESIS_PROFILE``) is used as it is, in either tier."""

from __future__ import annotations

import os

import pytest

EXAMPLES = {"slow tier": 200, "default tier": 50}


def _register() -> bool:
    """The three profiles; False where hypothesis is not installed (its tests skip through the
    needs marker)."""
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return False
    quiet = [HealthCheck.too_slow]
    slow = EXAMPLES["slow tier"]
    settings.register_profile(
        "ci", derandomize=True, database=None, max_examples=slow, deadline=None, suppress_health_check=quiet
    )
    settings.register_profile("dev", max_examples=slow, deadline=None, suppress_health_check=quiet)
    settings.register_profile("thorough", max_examples=3000, deadline=None, suppress_health_check=quiet)
    return True


HAVE_HYPOTHESIS = _register()


def chosen_profile(config: pytest.Config) -> tuple[str, bool]:
    """The profile this run loads and whether the user named it."""
    named = config.getoption("hypothesis_profile", None) or os.environ.get("FP8REF_HYPOTHESIS_PROFILE")
    if named:
        return str(named), True
    return ("ci" if os.environ.get("CI") else "dev"), False


@pytest.hookimpl(trylast=True)  # (after hypothesis's own plugin has loaded a --hypothesis-profile)
def pytest_configure(config: pytest.Config) -> None:
    if not HAVE_HYPOTHESIS:
        return
    from hypothesis import settings

    name, named = chosen_profile(config)
    if named or config.getoption("--fp8-slow"):
        settings.load_profile(name)
        return
    tier = f"{name}-default-tier"
    settings.register_profile(tier, parent=settings.get_profile(name), max_examples=EXAMPLES["default tier"])
    settings.load_profile(tier)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not HAVE_HYPOTHESIS:
        return ["fp8ref: hypothesis not installed (its properties skip)"]
    from hypothesis import settings

    name, examples = settings.get_current_profile_name(), settings.get_profile(settings.get_current_profile_name())
    return [f"fp8ref: hypothesis profile {name!r}, {examples.max_examples} examples a property"]
