"""The suite's one gating rule (tests/plugins/gating.py): what a missing or refusing package skips
with, and where the extras that name them come from."""

from typing import Any

import pytest

from fp8ref.harness.stack import install, probes
from tests.plugins import gating


class _Item:
    """The part of a pytest item the gate reads: its markers."""

    def __init__(self, *marks):
        self.marks = marks

    def iter_markers(self, name):
        return (m for m in self.marks if m.name == name)

    def get_closest_marker(self, name):
        return next(self.iter_markers(name), None)


def _skip_reason(item: Any) -> str | None:
    try:
        gating.pytest_runtest_setup(item)
    except pytest.skip.Exception as exc:
        return str(exc)
    return None


def test_a_missing_package_skips_naming_it_and_its_extra(monkeypatch):
    monkeypatch.setattr(install, "has_package", lambda pkg: pkg != "transformers")
    item = _Item(pytest.mark.needs("ml_dtypes", "transformers").mark)
    assert _skip_reason(item) == (
        "this test needs package transformers, which is not installed (pip install -e '.[finetune]')"
    )
    assert _skip_reason(_Item(pytest.mark.needs("ml_dtypes").mark)) is None


def test_a_torchao_that_does_not_import_skips_naming_the_versions(monkeypatch):
    monkeypatch.setattr(install, "has_package", lambda pkg: True)
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    reason = _skip_reason(_Item(pytest.mark.needs("torchao").mark))
    assert reason.startswith("torch ") and "cannot import torchao.float8: refused: ImportError" in reason


def test_a_broken_torchao_skips_the_tests_that_need_transformers_naming_it(monkeypatch):
    """transformers imports an installed torchao itself: a torchao that does not import with this
    torch breaks it too, and its tests skip saying why rather than fail."""
    monkeypatch.setattr(install, "has_package", lambda pkg: True)
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    reason = _skip_reason(_Item(pytest.mark.needs("transformers", "datasets").mark))
    assert reason.startswith("transformers imports torchao, which torch ") and "cannot import name 'X'" in reason
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: None)
    assert _skip_reason(_Item(pytest.mark.needs("transformers", "datasets").mark)) is None


def test_a_broken_torchao_is_one_line_from_the_fine_tune_command(monkeypatch, capsys):
    pytest.importorskip("transformers")
    from fp8ref.__main__ import main

    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    assert main(["finetune", "--preset", "tiny", "--steps", "2", "--no-progress", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: transformers imports torchao") and "cannot import" in err[0]


def test_an_unregistered_package_is_an_error_not_a_skip():
    """needs() names only packages whose extra is known, so every skip can say how to install."""
    with pytest.raises(ValueError, match="pkg: expected one of"):
        gating.pytest_runtest_setup(_Item(pytest.mark.needs("no_such_package").mark))


def test_the_extras_have_one_home_pyprojects_optional_dependencies(monkeypatch):
    """A skip names the extra from pyproject.toml itself (read through fp8ref's metadata, or the
    file in a checkout that was not installed): both readings agree, and every package the suite
    gates on has one."""
    import importlib.metadata
    import sys

    if sys.version_info < (3, 11):
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11+)")
    installed = install._extras()

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    from_file = install._extras()
    assert from_file == installed, "the installed metadata lags pyproject.toml: pip install -e . again"
    for pkg, extra in {"torchao": "test", "ml_dtypes": "test", "transformers": "finetune"}.items():
        assert from_file[pkg][1] == extra
    assert from_file["ml_dtypes"][0] == "ml-dtypes"
