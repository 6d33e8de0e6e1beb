"""The command a golden test's skip or failure says to run (``Golden.how_to_pin``) works pasted
in any folder and reads as the README writes it: the test by its absolute path (from which pytest
finds fp8ref's root folder and options) and ``--fp8-golden=PATH`` with ``=`` and absolute."""

import shlex
from pathlib import Path

import pytest

from tests.common.paths import GOLDEN, ROOT
from tests.plugins.fixtures import Golden

TESTS = ["tests/cpu/tools/test_golden_profile.py", "tests/gpu/test_golden_profile.py"]


@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("golden", ["ci/fp8-stack.json", "our goldens"])
def test_the_pin_hint_for_a_users_golden_is_absolute_with_equals(test, golden, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the folder the user ran pytest in; the hint is pasted elsewhere
    hint = Golden(Path(golden), True).how_to_pin(test)
    argv = shlex.split(hint)  # (a path with a space stays one argument)
    assert argv[0] == "pytest" and argv[-1] == "--fp8-update-golden", hint
    assert Path(argv[1]) == ROOT / test and Path(argv[1]).is_file(), f"expected the test at {ROOT / test}, got {hint}"
    options = argv[2:-1]
    assert options == [f"--fp8-golden={tmp_path / golden}"], f"expected --fp8-golden={tmp_path / golden}, got {hint}"


def test_the_pin_hint_for_fp8refs_own_golden_names_the_test_by_its_absolute_path():
    hint = Golden(GOLDEN, False).how_to_pin(TESTS[0])
    assert shlex.split(hint) == ["pytest", str(ROOT / TESTS[0]), "--fp8-update-golden"], hint
