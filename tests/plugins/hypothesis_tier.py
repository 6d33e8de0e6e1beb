"""The hypothesis profiles, and how many examples each tier draws.

Profiles: ``ci`` (derandomized: the same examples every run, no example database, no deadline: the
shared 2-core machines are too noisy for per-example time limits; the default when ``CI`` is set),
``dev`` (random examples and a local example database; the default otherwise) and ``thorough``
(3,000 examples, by hand). ``ci`` and ``dev`` draw 200 examples a property under ``--fp8-slow``
(which CI runs); the default tier draws 50 of the same properties (``<profile>-default-tier``, in
the run's header), so every property is still asserted there, on fewer inputs: the hypothesis
properties were 5 s of the default tier's minute on 2 cores (docs/timings.md). A profile named
(``--hypothesis-profile`` or ``FP8REF_HYPOTHESIS_PROFILE``) is used as it is, in either tier.

The run loads a copy of its profile under a name of fp8ref's own (``fp8ref-dev``, ...) and loads it
again before each test: torch's test utilities (torch.testing._internal.common_utils, which the
native-op survey imports for torch's OpInfo catalogue) register a ``dev`` profile of their own (10
examples) and load it (``pytorch_ci``, 50, under ``CI``) for the rest of the process. ``@given``
takes the settings loaded when it decorates: a property at module level takes the run's (collection
is over before the survey), a property built inside a test's body
(test_cast_conformance's arbitrary float32 casts) the profile loaded when it runs, which after the
survey was torch's."""

from __future__ import annotations

import os

import pytest

EXAMPLES = {"slow tier": 200, "default tier": 50}
_RUN_PROFILE = pytest.StashKey[str]()


def _profiles() -> dict[str, dict]:
    from hypothesis import HealthCheck

    quiet = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    slow = EXAMPLES["slow tier"]
    return {
        "ci": {"derandomize": True, "database": None, "max_examples": slow, **quiet},
        "dev": {"max_examples": slow, **quiet},
        "thorough": {"max_examples": 3000, **quiet},
    }


def _register() -> bool:
    """The profiles, each under its own name (what ``--hypothesis-profile NAME`` loads) and under
    fp8ref's (what a run loads); False where hypothesis is not installed (its tests skip through
    the needs marker)."""
    try:
        from hypothesis import settings
    except ImportError:
        return False
    for name, values in _profiles().items():
        settings.register_profile(name, **values)
        settings.register_profile(f"fp8ref-{name}", **values)
    return True


HAVE_HYPOTHESIS = _register()


def chosen_profile(config: pytest.Config) -> tuple[str, bool]:
    """The profile this run loads and whether the user named it."""
    named = config.getoption("hypothesis_profile", None) or os.environ.get("FP8REF_HYPOTHESIS_PROFILE")
    if named:
        return str(named), True
    return ("ci" if os.environ.get("CI") else "dev"), False


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A profile named (``--hypothesis-profile``, ``FP8REF_HYPOTHESIS_PROFILE``) that nobody
    registered is a usage error naming it, before any work (hypothesis's own plugin would stop the
    run with an internal error's traceback)."""
    if not HAVE_HYPOTHESIS:
        return
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    name, _ = chosen_profile(config)
    try:
        settings.get_profile(name)
    except InvalidArgument:
        option = config.getoption("hypothesis_profile", None)
        given = f"--hypothesis-profile {name}" if option else f"FP8REF_HYPOTHESIS_PROFILE={name}"
        raise pytest.UsageError(f"{given}: no such hypothesis profile (fp8ref's: {', '.join(_profiles())})") from None


@pytest.hookimpl(trylast=True)  # (after hypothesis's own plugin has loaded a --hypothesis-profile)
def pytest_configure(config: pytest.Config) -> None:
    if not HAVE_HYPOTHESIS:
        return
    from hypothesis import settings

    name, named = chosen_profile(config)
    ours = f"fp8ref-{name}" if name in _profiles() else name
    if not (named or config.getoption("--fp8-slow")):
        ours = f"fp8ref-{name}-default-tier"
        settings.register_profile(
            ours, parent=settings.get_profile(f"fp8ref-{name}"), max_examples=EXAMPLES["default tier"]
        )
    settings.load_profile(ours)
    config.stash[_RUN_PROFILE] = ours


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    ours = item.config.stash.get(_RUN_PROFILE, None)
    if ours is not None:
        from hypothesis import settings

        if settings.get_current_profile_name() != ours:  # (torch's test utilities loaded theirs)
            settings.load_profile(ours)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not HAVE_HYPOTHESIS:
        return ["fp8ref: hypothesis not installed (its properties skip)"]
    from hypothesis import settings

    name = config.stash.get(_RUN_PROFILE, settings.get_current_profile_name())
    return [f"fp8ref: hypothesis profile {name!r}, {settings.get_profile(name).max_examples} examples a property"]
