"""How many examples each tier draws (tests/plugins/hypothesis_tier.py): the default tier fewer,
``--fp8-slow`` the profile's own, a profile the user names as it is."""

import types

import pytest

from tests.plugins import hypothesis_tier

pytestmark = pytest.mark.needs("hypothesis")


def test_this_run_draws_its_tiers_examples(request):
    """Every hypothesis property this run collected carries its tier's examples (``@given`` takes
    the settings loaded when it decorates: at collection), and so does the profile loaded now."""
    from hypothesis import settings

    name, named = hypothesis_tier.chosen_profile(request.config)
    if named:
        pytest.skip(f"not checked: this run names its hypothesis profile ({name}), used as it is")
    tier = "slow tier" if request.config.getoption("--fp8-slow") else "default tier"
    drawn = {
        item.nodeid: item.obj._hypothesis_internal_use_settings.max_examples
        for item in request.session.items
        if getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None) is not None
    }
    wrong = {nodeid: n for nodeid, n in drawn.items() if n != hypothesis_tier.EXAMPLES[tier]}
    assert not wrong, wrong
    assert settings.default.max_examples == hypothesis_tier.EXAMPLES[tier], settings.get_current_profile_name()


def _config(slow: bool, profile: str | None) -> types.SimpleNamespace:
    options = {"--fp8-slow": slow, "hypothesis_profile": profile}
    return types.SimpleNamespace(getoption=lambda name, default=None: options.get(name, default), stash=pytest.Stash())


@pytest.mark.parametrize(
    ("slow", "profile", "env", "loaded", "examples"),
    [
        (False, None, {}, "fp8ref-dev-default-tier", 50),
        (True, None, {}, "fp8ref-dev", 200),
        (False, None, {"CI": "true"}, "fp8ref-ci-default-tier", 50),
        (True, None, {"CI": "true"}, "fp8ref-ci", 200),
        (False, "thorough", {}, "fp8ref-thorough", 3000),
        (False, None, {"FP8REF_HYPOTHESIS_PROFILE": "thorough"}, "fp8ref-thorough", 3000),
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


def test_a_profile_torchs_test_utilities_load_is_put_back_before_the_next_test(monkeypatch):
    """torch.testing._internal.common_utils (imported by the native-op survey) registers its own
    ``dev`` (10 examples, a 200 ms deadline) and loads it; the run's own is loaded again."""
    from hypothesis import settings

    before = settings.get_current_profile_name()
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("FP8REF_HYPOTHESIS_PROFILE", raising=False)
    config = _config(False, None)
    try:
        hypothesis_tier.pytest_configure(config)
        settings.register_profile("dev", max_examples=10)  # (as torch's test utilities do)
        settings.load_profile("dev")
        hypothesis_tier.pytest_runtest_setup(types.SimpleNamespace(config=config))
        assert (settings.get_current_profile_name(), settings.default.max_examples) == ("fp8ref-dev-default-tier", 50)
        assert settings.default.deadline is None
    finally:
        hypothesis_tier._register()
        settings.load_profile(before)
