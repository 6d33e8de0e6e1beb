"""Which frame is the user's line (``fp8ref.harness.trace.call_site``): told by where its code
lives, not by a list of library names. Each case runs code compiled as if it were a file in some
folder and asks it for its call site: the user's code names its own line, machinery's names the
line of this file that called it (the next frame out)."""

from __future__ import annotations

import json
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from fp8ref.harness.trace import call_site
from fp8ref.harness.trace.target import load_target, target_code

_ASK = "def where():\n    return call_site(1)\n"  # (line 2: the frame call_site starts from)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    call_site.forget()  # (the folders and verdicts another test worked out, the targets it loaded)
    yield
    call_site.forget()


def _site_of(filename: str | Path) -> str:
    """The call site code in ``filename`` (which need not exist) names, asked from line 2 there."""
    namespace = {"call_site": call_site.call_site}
    exec(compile(_ASK, str(filename), "exec"), namespace)
    return namespace["where"]()  # <- here


def _here() -> str:
    (number,) = [i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith("# <- here")]
    return f"{__file__}:{number}"


def _theirs(filename: str | Path) -> bool:
    site = _site_of(filename)
    assert site in (f"{filename}:2", _here()), site
    return site == f"{filename}:2"


def _write(path: Path, text: str = _ASK) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _site_packages(root: Path) -> Path:
    return root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def test_a_teams_file_outside_any_installed_folder_is_the_users(tmp_path):
    assert _theirs(tmp_path / "team" / "train" / "step.py")
    assert _theirs("<string>") and _theirs("<stdin>")


def test_pythons_own_library_generated_code_and_frozen_modules_are_machinery(tmp_path):
    assert not _theirs(Path(sysconfig.get_paths()["stdlib"]) / "contextlib_standin.py")
    assert not _theirs(tmp_path / "torchinductor_me" / "ab" / "cabcdef.py")
    assert not _theirs("<frozen importlib._bootstrap>") and not _theirs("<eval_with_key>.3")


def test_any_library_installed_beside_torch_is_machinery_whatever_its_name(tmp_path):
    for name in ("kernels", "peft", "deepspeed", "lightning", "teamframework"):
        assert not _theirs(_site_packages(tmp_path / "venv") / name / "layer.py"), name
    assert not _theirs(tmp_path / "usr" / "lib" / "python3" / "dist-packages" / "wrapper" / "core.py")


def test_code_downloaded_from_the_hub_is_machinery(tmp_path, monkeypatch):
    """A hub kernel ``kernels`` puts in place of a forward, a ``trust_remote_code`` model: code
    imported from the Hugging Face cache, wherever the environment puts it."""
    for name in ("HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_MODULES_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "kernels"))
    hub = tmp_path / "me" / ".cache" / "huggingface" / "hub"
    assert not _theirs(hub / "models--kernels-community--activation" / "snapshots" / "ab" / "layers.py")
    assert not _theirs(tmp_path / "kernels" / "kernels--team--fp8" / "build" / "torch" / "layers.py")
    assert _theirs(tmp_path / "me" / "team" / "train.py")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    call_site.forget()
    assert not _theirs(tmp_path / "hf" / "modules" / "transformers_modules" / "team" / "modeling_x.py")
    assert _theirs(hub / "models--kernels-community--activation" / "snapshots" / "ab" / "layers.py")


def test_fp8ref_is_machinery_wherever_it_lives_but_its_shipped_workloads():
    import fp8ref

    package = Path(fp8ref.__file__).resolve().parent
    assert not _theirs(package / "harness" / "trace" / "recorder.py")
    assert _theirs(package / "harness" / "workloads" / "float8_linear.py")


@pytest.fixture
def teampkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A team's package installed into a site-packages folder on ``sys.path``: its ``step.py``
    asks for its call site on line 3."""
    installed = _site_packages(tmp_path / "venv")
    _write(installed / "teampkg" / "train" / "step.py", f"from fp8ref.harness.trace.call_site import call_site\n{_ASK}")
    _write(installed / "teampkg" / "__init__.py", "")
    _write(installed / "teampkg" / "train" / "__init__.py", "")
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(tmp_path))  # (load_target's folder: put there, and taken away, here)
    try:
        yield installed / "teampkg"
    finally:
        for name in ("teampkg", "teampkg.train", "teampkg.train.step"):
            sys.modules.pop(name, None)


def test_a_team_package_installed_into_site_packages_is_the_users_once_it_is_the_target(teampkg, tmp_path):
    step = teampkg / "train" / "step.py"
    assert not _theirs(step)  # (installed, and no target named it: a library)
    where = load_target("teampkg.train.step:where", tmp_path)
    assert where() == f"{step}:3"
    assert target_code("teampkg.train.step") == [str(teampkg)]
    assert _theirs(teampkg / "models.py")  # (the whole package: the target's helpers are the user's too)
    assert not _theirs(teampkg.parent / "otherlib" / "__init__.py")  # (its neighbours stay libraries)


def test_a_plain_module_named_as_the_target_is_the_users_file_alone_inside_site_packages(tmp_path, monkeypatch):
    installed = _site_packages(tmp_path / "venv")
    loose = _write(installed / "loose_module.py", f"from fp8ref.harness.trace.call_site import call_site\n{_ASK}")
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        where = load_target("loose_module:where", tmp_path)
        assert target_code("loose_module") == [str(installed), str(loose)]
    finally:
        sys.modules.pop("loose_module", None)
    assert where() == f"{loose}:3"
    assert not _theirs(installed / "torch_standin" / "nn.py")  # (site-packages' folder stays machinery's)
    assert _theirs(tmp_path / "team" / "train.py")


def _editable(tmp_path: Path, name: str, checkout: Path, top_level: str | None) -> None:
    """A distribution ``pip install -e`` put in a site-packages folder on ``sys.path``: its
    metadata there, its code in ``checkout``."""
    info = _site_packages(tmp_path / "venv") / f"{name}-1.0.dist-info"
    _write(info / "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    _write(info / "direct_url.json", json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}}))
    if top_level is not None:
        _write(info / "top_level.txt", top_level)


def test_an_editable_wrapper_is_machinery_but_where_the_user_runs_from(tmp_path, monkeypatch):
    """A distribution installed from a checkout (``pip install -e``: its ``direct_url.json``)
    holds a library, not the user's code, unless the user runs from inside that checkout or
    from a folder holding it. With no ``top_level.txt`` to name its packages, the whole checkout."""
    checkout, team = tmp_path / "src" / "wrapper", tmp_path / "team"
    _editable(tmp_path, "wrapper", checkout, top_level=None)
    monkeypatch.syspath_prepend(str(_site_packages(tmp_path / "venv")))
    for where, wrappers in ((team, False), (checkout / "examples", True), (tmp_path, True)):
        where.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(where)
        call_site.forget()  # (the folder the user runs from is read once)
        assert _theirs(checkout / "wrapper" / "layer.py") is wrappers, where
        assert _theirs(checkout / "examples" / "demo.py") is wrappers, where
        assert _theirs(team / "train.py"), where


def test_an_editable_installs_packages_are_machinery_and_its_tests_are_programs(tmp_path, monkeypatch):
    """Its ``top_level.txt`` names its packages (found where the install's finder puts them):
    those are the library; the checkout's tests and examples are programs run against it (fp8ref's
    own suite, run from outside its checkout)."""
    checkout = tmp_path / "src" / "wrapper"
    _write(checkout / "src" / "wrapper_standin" / "__init__.py", "")
    _editable(tmp_path, "wrapper-standin", checkout, top_level="wrapper_standin\n")
    monkeypatch.syspath_prepend(str(_site_packages(tmp_path / "venv")))
    monkeypatch.syspath_prepend(str(checkout / "src"))  # (what the install's .pth does)
    monkeypatch.chdir(_write(tmp_path / "team" / "train.py").parent)
    call_site.forget()
    assert not _theirs(checkout / "src" / "wrapper_standin" / "layer.py")
    assert _theirs(checkout / "tests" / "test_layer.py")


def test_a_block_with_the_users_code_named_sees_no_other_line(tmp_path):
    team, elsewhere = tmp_path / "team", tmp_path / "helpers" / "wrap.py"
    assert _theirs(elsewhere)
    with call_site.only_user_code(team, __file__):
        assert not _theirs(elsewhere)
        assert _theirs(team / "step.py")
    assert _theirs(elsewhere)


def test_bad_paths_are_refused_naming_the_argument():
    with pytest.raises(TypeError, match="path: expected"):
        call_site.add_user_code(3)
    with pytest.raises(TypeError, match="paths: expected"):
        with call_site.only_user_code():
            pass


def test_a_stack_with_no_frame_of_the_users_code_is_no_site(tmp_path):
    with call_site.only_user_code(tmp_path / "nothing_runs_here"):
        assert call_site.call_site() == call_site.NO_SITE


def test_a_chain_is_the_users_innermost_run_of_frames_up_to_the_first_library_frame(tmp_path):
    """``call_chain``: the user's frame that called, then its callers while they are the user's; a
    library frame between ends it (the user's frames further out are another story)."""
    team, library = tmp_path / "team" / "fp8.py", _site_packages(tmp_path / "venv") / "wrap" / "core.py"
    namespace: dict = {"call_chain": call_site.call_chain}
    helper = "def helper():\n    return call_chain(1)\ndef caller():\n    return helper()\n"
    exec(compile(helper, str(team), "exec"), namespace)
    exec(compile("def wrapped(f):\n    return f()\n", str(library), "exec"), namespace)
    exec(compile("def outer():\n    return wrapped(caller)\n", str(team), "exec"), namespace)
    with call_site.only_user_code(team.parent):  # (this test file's frames are not the team's)
        assert namespace["caller"]() == f"{team}:2 <- {team}:4"
        assert namespace["outer"]() == f"{team}:2 <- {team}:4"  # (outer's line lies past the library's)
    assert call_site.call_chain(1, depth=1) == call_site.call_site(1)
    with call_site.only_user_code(tmp_path / "nothing_runs_here"):
        assert call_site.call_chain() == call_site.NO_SITE
