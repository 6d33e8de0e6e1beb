"""The maintenance scripts under scripts/ import: a module they name moved inside fp8ref must
fail here, not months later when someone reruns the version matrix."""

import importlib.util
from pathlib import Path
from typing import Any

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


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_fp8ref_script_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GOLDEN_TEST = "tests/cpu/tools/test_golden_profile.py::test_behaviour_profile_matches_the_cpu_golden"


def _junit(tmp_path: Path, failed: list[tuple[str, str]]) -> Path:
    cases = "".join(
        f'<testcase classname="{cls}" name="{name}"><failure message="x"/></testcase>' for cls, name in failed
    )
    path = tmp_path / "run.xml"
    path.write_text(f'<testsuites><testsuite><testcase classname="a.b" name="ok"/>{cases}</testsuite></testsuites>')
    return path


def test_the_pip_picks_job_fails_on_any_failure_but_the_golden_comparison(tmp_path, capsys):
    ci = _script("ci_failures")
    golden = ("tests.cpu.tools.test_golden_profile", "test_behaviour_profile_matches_the_cpu_golden")
    assert ci.main([str(_junit(tmp_path, [golden])), "--rc", "1", "--allow", GOLDEN_TEST]) == 0
    other = ("tests.cpu.install.test_workloads", "test_the_workload_traces_clean[accelerate_fp8-cpu]")
    assert ci.main([str(_junit(tmp_path, [golden, other])), "--rc", "1", "--allow", GOLDEN_TEST]) == 1
    assert "failed: tests/cpu/install/test_workloads.py::test_the_workload_traces_clean[accelerate_fp8-cpu]" in (
        capsys.readouterr().out
    )
    # an interrupted run, a usage error or a missing report is never a pass
    assert ci.main([str(_junit(tmp_path, [])), "--rc", "2", "--allow", GOLDEN_TEST]) == 1
    assert ci.main([str(tmp_path / "none.xml"), "--rc", "0"]) == 1
