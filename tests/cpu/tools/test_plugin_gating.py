"""The suite's one gating rule (tests/plugins/gating.py): what a missing or refusing package skips
with, and where the extras that name them come from."""

from typing import Any

import pytest

from fp8ref.harness.stack import install, probes
from tests.common import params
from tests.common.paths import ROOT
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


def test_a_broken_torchao_is_one_line_from_the_fine_tune_command(monkeypatch, capsys, tmp_path):
    pytest.importorskip("transformers")
    from fp8ref.__main__ import main

    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    # (an --out that can be written: a bad one is refused first, before torch is imported)
    assert main(["finetune", "--preset", "tiny", "--steps", "2", "--no-progress", "--out", str(tmp_path / "x")]) == 2
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


class _Collected(_Item):
    """A collected item at ``path``: its own markers, and the ones gating adds."""

    def __init__(self, path, *marks):
        super().__init__(*marks)
        self.path, self.added = path, []

    def add_marker(self, mark):
        self.added.append(mark.name)


class _Options:
    def getoption(self, name):
        return False


def test_the_cases_of_a_test_parametrized_by_device_keep_their_own_cpu_or_gpu_mark():
    """The folder marks every test in it, but not the cases of a test parametrized by device
    (``params.on_devices``): its cuda case under tests/cpu is not also marked cpu, so ``-m cpu``
    does not run it, nor ``-m gpu`` its cpu case."""
    where = ROOT / "tests" / "cpu" / "install" / "test_scaled_mm.py"
    plain, cpu_case = _Collected(where), _Collected(where, pytest.mark.cpu)
    cuda_case = _Collected(where, pytest.mark.gpu)
    gating.pytest_collection_modifyitems(_Options(), [plain, cpu_case, cuda_case])
    assert (plain.added, cpu_case.added, cuda_case.added) == (["cpu"], [], [])


def test_on_devices_marks_the_cpu_case_cpu_and_the_cuda_case_gpu_with_its_own_marks():
    mark = params.on_devices(pytest.mark.sm(89, "FP8 tensor cores")).mark
    cases = {case.id: sorted(m.name for m in case.marks) for case in mark.args[1]}
    assert mark.args[0] == "device" and mark.kwargs == {"indirect": True}
    assert cases == {"cpu": ["cpu"], "cuda": ["gpu", "sm"]}
