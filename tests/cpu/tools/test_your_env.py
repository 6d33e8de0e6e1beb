"""scripts/your_env.py, the suite in the environment a user already has: which packages it
installs (the test packages the environment lacks, never the stack), what it pins, and what it
calls a change of the stack. CI runs it end to end in an environment whose torch was installed
first (.ci/run), and checks that torch is still that one after."""

import importlib.util

import pytest

from tests.common.paths import ROOT


@pytest.fixture(scope="module")
def your_env():
    spec = importlib.util.spec_from_file_location("_fp8ref_your_env", ROOT / "scripts" / "your_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_test_packages_are_pyprojects_test_extra_with_or_without_tomllib(your_env):
    reqs = your_env.test_requirements()
    assert "pytest>=8" in reqs and any(r.startswith("torchao") for r in reqs)
    assert your_env.test_extra_without_toml((ROOT / "pyproject.toml").read_text()) == reqs
    with pytest.raises(ValueError, match="no 'test = \\[...\\]' extra"):
        your_env.test_extra_without_toml("[project]\nname = 'x'\n")


def test_only_what_is_missing_or_too_old_is_installed_and_never_the_stack(your_env):
    reqs = ["pytest>=8", "hypothesis>=6.100", "ml-dtypes>=0.5", "torchao>=0.17", "numpy>=1.26"]
    have = {"torch": "2.13.0+cpu", "pytest": "7.4.0", "hypothesis": "6.170.1"}
    # pytest too old, ml-dtypes and numpy missing; torchao is the stack's, so it is not installed
    # even when missing (its tests skip, naming it)
    assert your_env.to_install(reqs, have) == ["pytest>=8", "ml-dtypes>=0.5", "numpy>=1.26"]
    assert your_env.to_install(reqs, {**have, "pytest": "9.2.0", "ml-dtypes": "0.6.0", "numpy": "2.4.6"}) == []


def test_the_constraint_pins_every_kept_package_the_environment_has(your_env):
    have = {"torch": "2.14.1+cu130", "transformers": "5.24.0", "numpy": "2.4.6", "pytest": "9.2.0"}
    assert your_env.constraints(have) == "torch==2.14.1+cu130\ntransformers==5.24.0\nnumpy==2.4.6\n"


def test_a_moved_or_added_stack_package_is_a_change_an_added_numpy_is_not(your_env):
    before = {"torch": "2.13.0+cpu", "numpy": "2.4.6"}
    assert your_env.changed(before, {**before, "numpy": "2.4.6", "pytest": "9"}) == []
    assert your_env.changed({"torch": "2.13.0+cpu"}, {"torch": "2.13.0+cpu", "numpy": "2.4.6"}) == []
    assert your_env.changed(before, {**before, "torch": "2.15.0"}) == ["torch: 2.13.0+cpu -> 2.15.0"]
    assert your_env.changed(before, {**before, "torchao": "0.18.0"}) == ["torchao: not installed -> 0.18.0"]
    assert your_env.changed(before, {**before, "numpy": "1.26.4"}) == ["numpy: 2.4.6 -> 1.26.4"]


def test_an_environment_without_torch_is_told_to_install_its_stack_first(your_env, monkeypatch, capsys):
    monkeypatch.setattr(your_env, "installed", lambda python=None: {"pip": "24.0"})
    assert your_env.main(["--report", "x.md"]) == 2
    assert "torch is not installed" in capsys.readouterr().err


def test_a_requirement_without_a_name_is_refused(your_env):
    with pytest.raises(ValueError, match="requirement: expected"):
        your_env.requirement_name(">=1")
