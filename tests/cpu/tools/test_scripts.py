"""The maintenance scripts under scripts/ import: a module they name moved inside fp8ref must
fail here, not months later when someone reruns the version matrix."""

import importlib.util

import pytest

from tests.common.paths import ROOT

PY_SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


@pytest.mark.parametrize("path", PY_SCRIPTS, ids=lambda p: p.name)
def test_script_imports_and_has_a_main(path):
    spec = importlib.util.spec_from_file_location(f"_fp8ref_script_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # runs the imports; main() runs only under __main__
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
