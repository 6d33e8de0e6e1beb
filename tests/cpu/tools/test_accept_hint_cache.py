"""Where the profile an accept hint names is kept. Its own file: tests/cpu/tools/test_golden_profile.py
is the golden test a user runs by path (the README, tests/scripts/user_golden.py), one test alone."""

from pathlib import Path


def test_the_profile_the_accept_hint_names_is_kept_in_pytests_cache_until_the_next_run(tmp_path):
    """pytest's temporary folders rotate (three runs a user, any suite's runs): a command naming
    one could point at nothing a minute later. With the cache on, the profile goes there."""
    import types

    from fp8ref.pytest_golden import _save_now

    cache_dir = tmp_path / "pytest_cache_d"

    def mkdir(name: str) -> Path:
        (cache_dir / name).mkdir(parents=True, exist_ok=True)
        return cache_dir / name

    config = types.SimpleNamespace(cache=types.SimpleNamespace(mkdir=mkdir), _tmp_path_factory=None)
    path = _save_now(config, {"versions": {"torch": "x"}, "behaviour": {"k": "v"}}, "cpu")
    assert path.parent == cache_dir / "fp8ref-now" and path.is_file(), path
