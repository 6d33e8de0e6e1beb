"""How many examples each tier draws (tests/plugins/hypothesis_tier.py): the default tier fewer,
``--fp8-slow`` the profile's own, a profile the user names as it is."""

import types

import pytest

from tests.plugins import hypothesis_tier

pytestmark = pytest.mark.needs("hypothesis")


def test_this_run_draws_its_tiers_examples(request):
    from hypothesis import settings

    name, named = hypothesis_tier.chosen_profile(request.config)
    if named:
        pytest.skip(f"not checked: this run names its hypothesis profile ({name}), used as it is")
    tier = "slow tier" if request.config.getoption("--fp8-slow") else "default tier"
    assert settings.default.max_examples == hypothesis_tier.EXAMPLES[tier], settings.get_current_profile_name()


def _config(slow: bool, profile: str | None) -> types.SimpleNamespace:
    options = {"--fp8-slow": slow, "hypothesis_profile": profile}
    return types.SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))


@pytest.mark.parametrize(
    ("slow", "profile", "env", "loaded", "examples"),
    [
        (False, None, {}, "dev-default-tier", 50),
        (True, None, {}, "dev", 200),
        (False, None, {"CI": "true"}, "ci-default-tier", 50),
        (True, None, {"CI": "true"}, "ci", 200),
        (False, "thorough", {}, "thorough", 3000),
        (False, None, {"FP8REF_HYPOTHESIS_PROFILE": "thorough"}, "thorough", 3000),
    ],
)
def test_the_profile_each_tier_loads(monkeypatch, slow, profile, env, loaded, examples):
    from hypothesis import settings

    before = settings.get_current_profile_name()
    for name in ("CI", "FP8REF_HYPOTHESIS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        hypothesis_tier.pytest_configure(_config(slow, profile))
        assert (settings.get_current_profile_name(), settings.default.max_examples) == (loaded, examples)
    finally:
        settings.load_profile(before)
