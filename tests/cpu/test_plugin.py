"""The suite's one gating rule (tests/plugin.py): what a missing or refusing package skips with."""

import pytest

from fp8ref import install
from tests import plugin


class _Item:
    """The part of a pytest item the gate reads: its markers."""

    def __init__(self, *marks):
        self.marks = marks

    def iter_markers(self, name):
        return (m for m in self.marks if m.name == name)

    def get_closest_marker(self, name):
        return next(self.iter_markers(name), None)


def _skip_reason(item) -> str | None:
    try:
        plugin.pytest_runtest_setup(item)
    except pytest.skip.Exception as exc:
        return str(exc)
    return None


def test_a_missing_package_skips_naming_it_and_its_extra(monkeypatch):
    monkeypatch.setattr(install, "has_package", lambda pkg: pkg != "transformers")
    item = _Item(pytest.mark.needs("ml_dtypes", "transformers").mark)
    assert _skip_reason(item) == ("this test needs package transformers, which is not installed "
                                  "(pip install -e '.[finetune]')")
    assert _skip_reason(_Item(pytest.mark.needs("ml_dtypes").mark)) is None


def test_a_torchao_that_does_not_import_skips_naming_the_versions(monkeypatch):
    monkeypatch.setattr(install, "has_package", lambda pkg: True)
    monkeypatch.setattr(install, "torchao_float8", lambda: "refused: ImportError: cannot import name 'X'")
    reason = _skip_reason(_Item(pytest.mark.needs("torchao").mark))
    assert reason.startswith("torch ") and "cannot import torchao.float8: refused: ImportError" in reason


def test_an_unregistered_package_is_an_error_not_a_skip():
    """needs() names only packages whose extra is known, so every skip can say how to install."""
    with pytest.raises(ValueError, match="pkg: expected one of"):
        plugin.pytest_runtest_setup(_Item(pytest.mark.needs("no_such_package").mark))
