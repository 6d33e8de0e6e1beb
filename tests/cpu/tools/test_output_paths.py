"""The files fp8ref writes for its users: a write through a symbolic link updates the link's
target and leaves the link a link; a path that is not a regular file (a folder, a device, a FIFO)
is never replaced; and every output path (``profile --out``, ``accept``'s installs file,
``--fp8-report``, ``--fp8-update-golden``'s golden, ``scripts/your_env.py --report``) is checked
before the work, with one error naming the user's path (``atomic.check_writable``)."""

import importlib.util
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import cast

import pytest

import fp8ref.harness.profiles.profile
from fp8ref.__main__ import main
from fp8ref.harness.profiles import atomic
from fp8ref.pytest_golden import SUITE_GOLDEN, check_before_collecting
from tests.common.beside import pytest_each, pytest_each_result
from tests.common.paths import GOLDEN, ROOT

KEY = "cast.e4m3fn.bf16.overflow"


def _no_temporaries(*folders: Path) -> list[str]:
    """What a write left behind besides its target: mkstemp's ``.NAME.*`` files."""
    return [p.name for folder in folders for p in folder.iterdir() if p.name.startswith(".")]


def _unwritable(kind: str, folder: Path) -> tuple[Path, str]:
    """An output path of ``kind`` in ``folder`` that must be refused, and what the refusal says
    after ``WHAT: ``."""
    path = folder / "out.json"
    if kind == "folder":
        path.mkdir()
        return path, f"{path} is a folder, not a regular file"
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip(f"os.mkfifo: this platform ({sys.platform}) has no FIFOs, so a FIFO output is not checked")
        os.mkfifo(path)
        return path, f"{path} is a FIFO (named pipe), not a regular file"
    if kind == "device":
        if not stat.S_ISCHR(os.stat(os.devnull).st_mode):
            pytest.skip(f"{os.devnull} is not a character device here: a device output is not checked")
        return Path(os.devnull), f"{os.devnull} is a character device, not a regular file"
    if kind == "under a file":
        (folder / "a-file").write_text("")
        return (
            folder / "a-file" / "out.json",
            f"cannot write {folder / 'a-file' / 'out.json'}: {folder / 'a-file'} is not a folder",
        )
    raise ValueError(f"kind: {kind!r}")


# --- writes: through links, never over what is not a regular file ------------------------------


def test_a_write_through_a_link_replaces_its_target_whole_and_keeps_the_link(tmp_path):
    """A ``-installs.json`` linked into a shared folder: the shared file is what gets updated."""
    shared, mine = tmp_path / "shared", tmp_path / "ci"
    shared.mkdir()
    mine.mkdir()
    (shared / "installs.json").write_text("the shared version\n")
    link = mine / "fp8-stack-installs.json"
    link.symlink_to(Path("..") / "shared" / "installs.json")  # relative, as a checkout links
    atomic.write_text(link, "new\n")
    assert link.is_symlink(), f"{link}: expected a link still, got a regular file"
    assert os.readlink(link) == str(Path("..") / "shared" / "installs.json")
    assert (shared / "installs.json").read_text() == "new\n", "the link's target was not updated"
    assert _no_temporaries(shared, mine) == []


def test_a_link_to_a_file_not_yet_there_creates_it_beside_the_target(tmp_path):
    (tmp_path / "shared").mkdir()
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "shared" / "new.json")
    atomic.write_text(link, "x")
    assert link.is_symlink() and (tmp_path / "shared" / "new.json").read_text() == "x"


def test_a_replaced_file_keeps_its_permission_bits(tmp_path):
    """A golden or installs file shared with a group (say 0604) stays so after a re-pin or an
    ``accept``: replacing it whole must not reset it to the writer's umask."""
    target = tmp_path / "stack.json"
    target.write_text("old\n")
    os.chmod(target, 0o604)
    atomic.write_text(target, "new\n")
    got = stat.S_IMODE(target.stat().st_mode)
    assert got == 0o604, f"{target}: expected mode 0o604 kept, got {oct(got)}"


@pytest.mark.parametrize("kind", ["folder", "fifo", "under a file"])
def test_a_path_that_is_not_a_regular_file_is_refused_and_left_as_it_is(kind, tmp_path):
    path, message = _unwritable(kind, tmp_path)
    before = os.stat(path).st_mode if os.path.exists(path) else None
    with pytest.raises(atomic.UnwritablePath) as refused:
        atomic.write_text(path, "x")
    assert str(refused.value) == f"output: {message}"
    after = os.stat(path).st_mode if os.path.exists(path) else None
    assert after == before, f"{path}: expected it left as it was ({before}), got {after}"
    assert _no_temporaries(tmp_path) == []


def test_a_device_is_refused_by_the_check():
    """Only the check here: a write that went wrong would replace the device node (as root)."""
    path, message = _unwritable("device", Path("."))
    with pytest.raises(atomic.UnwritablePath) as refused:
        atomic.check_writable(path, "--out")
    assert str(refused.value) == f"--out: {message}"


def _writes(folder: Path) -> bool:
    """Whether this process can create a file in ``folder``, by trying (the system's answer)."""
    try:
        (folder / "probe").write_text("")
    except OSError:
        return False
    (folder / "probe").unlink()
    return True


def test_the_check_agrees_with_the_system_on_a_folder_without_write_permission(tmp_path):
    """0555: refused for a user; root may write there, and then the check must not refuse."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        system = _writes(folder)
        try:
            atomic.check_writable(folder / "out.json", "--out")
            check = True
        except atomic.UnwritablePath as exc:
            check = False
            assert str(folder) in str(exc), exc
    finally:
        folder.chmod(0o755)
    assert check == system, f"{folder} (0555): the system says writable={system}, the check {check}"


def test_the_check_agrees_with_the_system_on_a_read_only_file(tmp_path):
    """0444: refused for a user (a golden protected from a re-pin stays protected); root may
    write it, and then the check must not refuse."""
    path = tmp_path / "stack.json"
    path.write_text("pinned\n")
    path.chmod(0o444)
    try:
        with open(path, "a"):
            system = True
    except PermissionError:
        system = False
    try:
        atomic.check_writable(path, "--fp8-golden")
        check = True
    except atomic.UnwritablePath as exc:
        check = False
        assert str(exc) == f"--fp8-golden: {path} is read-only", exc
    assert check == system, f"{path} (0444): the system says writable={system}, the check {check}"


def test_a_missing_folder_that_can_be_created_passes_and_is_not_created_by_the_check(tmp_path):
    path = tmp_path / "new" / "deeper" / "out.json"
    assert atomic.check_writable(path, "--out") == path
    assert not (tmp_path / "new").exists(), "the check created the folder: it must change nothing"


def test_an_empty_path_is_refused():
    with pytest.raises(atomic.UnwritablePath, match="--fp8-report: expected a path, got an empty value"):
        atomic.check_writable("", "--fp8-report")


# --- the command line: checked before the work, one error line ----------------------------------


@pytest.mark.parametrize("kind", ["folder", "fifo", "device", "under a file"])
def test_profile_out_that_cannot_be_written_is_one_error_before_collecting(kind, tmp_path, monkeypatch, capsys):
    """Before: ``profile --out DIR`` collected for 29 s, then failed naming its temporary file,
    and on /dev/null replaced the device node with a JSON file."""
    path, message = _unwritable(kind, tmp_path)
    monkeypatch.setattr(
        fp8ref.harness.profiles.profile, "collect", lambda *a, **k: pytest.fail("collected before checking --out")
    )
    assert main(["profile", "--out", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: --out: {message}"], lines


def _profiles(folder: Path) -> tuple[Path, Path]:
    """A golden (fp8ref's CPU golden) and a profile that differs from it in ``KEY``."""
    golden, now = folder / "fp8-stack.json", folder / "now.json"
    data = json.loads((GOLDEN / "cpu.json").read_text())
    golden.write_text(json.dumps(data))
    data["behaviour"][KEY] = "something else"
    now.write_text(json.dumps(data))
    return golden, now


def test_accept_writes_a_linked_installs_file_through_the_link(tmp_path, capsys):
    shared, ci = tmp_path / "shared", tmp_path / "ci"
    shared.mkdir()
    ci.mkdir()
    golden, now = _profiles(ci)
    target = shared / "fp8-stack-installs.json"
    target.write_text("{}\n")
    link = ci / "fp8-stack-installs.json"
    link.symlink_to(target)
    assert main(["accept", str(golden), str(now), "--why", "our loss scaler clips first"]) == 0, capsys.readouterr()
    assert link.is_symlink() and os.readlink(link) == str(target), f"{link}: expected a link to {target} still"
    ((label, entry),) = json.loads(target.read_text()).items()
    assert entry["differences"] == {KEY: "something else"}, (label, entry)
    assert _no_temporaries(shared, ci) == []


def test_accept_into_an_installs_path_that_is_a_folder_is_one_error(tmp_path, capsys):
    golden, now = _profiles(tmp_path)
    (tmp_path / "fp8-stack-installs.json").mkdir()
    assert main(["accept", str(golden), str(now), "--why", "x"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: accept: {tmp_path / 'fp8-stack-installs.json'} is a folder, not a regular file"], lines


# --- pytest's options and scripts/your_env.py -------------------------------------------------


class _Options:
    """What ``check_before_collecting`` reads of a pytest config in fp8ref's checkout:
    ``getoption``, and the stash saying this suite's golden tests compare ``tests/golden``."""

    def __init__(self, **options: object) -> None:
        self.options = {f"--{k.replace('_', '-')}": v for k, v in options.items()}
        self.stash = pytest.Stash()
        self.stash[SUITE_GOLDEN] = GOLDEN

    def getoption(self, name: str, default: object = None) -> object:
        return self.options.get(name, default)


def _check(**options: object) -> None:
    check_before_collecting(cast(pytest.Config, _Options(**options)))


def test_update_golden_into_a_path_that_cannot_be_written_is_a_usage_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(
        pytest.UsageError, match=re.escape(f"--fp8-golden: cannot write {tmp_path / 'a-file' / 'stack.json'}: ")
    ):
        _check(fp8_golden=str(tmp_path / "a-file" / "stack.json"), fp8_update_golden=True)
    # a folder of goldens (a path not ending in .json) that is a file
    with pytest.raises(pytest.UsageError, match="is a file, not a folder"):
        _check(fp8_golden=str(tmp_path / "a-file"), fp8_update_golden=True)
    # a folder that is not there is never created: a mistyped one is an error, not a new tree
    with pytest.raises(pytest.UsageError, match=re.escape(f"the folder {tmp_path / 'ci'} does not exist")):
        _check(fp8_golden=str(tmp_path / "ci" / "stack.json"), fp8_update_golden=True)
    (tmp_path / "ci").mkdir()
    _check(fp8_golden=str(tmp_path / "ci" / "stack.json"), fp8_update_golden=True)
    _check(fp8_golden=str(tmp_path / "ci" / "goldens"), fp8_update_golden=True)  # a folder of goldens, made when pinned
    _check(fp8_golden=str(tmp_path / "a-file" / "stack.json"))  # read only: nothing to write
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "ci"] and not any((tmp_path / "ci").iterdir())


@pytest.mark.parametrize("kind", ["folder", "fifo", "under a file"])
def test_a_report_path_that_cannot_be_written_is_a_usage_error(kind, tmp_path):
    path, message = _unwritable(kind, tmp_path)
    with pytest.raises(pytest.UsageError) as refused:
        _check(fp8_report=str(path))
    assert str(refused.value) == f"--fp8-report: {message}"


def run_beside(folder):
    """pytest as a user runs it, with a report path under a file: it must stop at configure."""
    (folder / "a-file").write_text("")
    argv = [
        str(ROOT / "tests" / "cpu" / "tools" / "test_golden_profile.py"),
        f"--fp8-report={folder / 'a-file' / 'report.md'}",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        f"--basetemp={folder / 'run'}",
    ]
    return {"runs": pytest_each({"report under a file": {"argv": argv, "cwd": str(folder)}})}


def test_pytest_with_an_unwritable_report_stops_before_collecting(beside):
    """Before: the run collected and ran, then ended with a traceback from the report's writer
    and no summary line."""
    done = pytest_each_result(beside("runs"), "report under a file")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --fp8-report: cannot write ") and "a-file" in errors[0], (
        done.stderr[-2000:]
    )
    assert "collected" not in done.stdout and "Traceback" not in done.stderr, done.stdout[-2000:]


def test_your_env_with_an_unwritable_report_stops_before_installing_anything(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("_fp8ref_your_env_paths", ROOT / "scripts" / "your_env.py")
    assert spec is not None and spec.loader is not None
    your_env = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(your_env)
    monkeypatch.setattr(your_env, "installed", lambda python=None: pytest.fail("looked at the environment first"))
    assert your_env.main(["--report", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: --report: {tmp_path} is a folder, not a regular file"], lines


def test_finetune_refuses_an_unwritable_out_before_it_trains(tmp_path, monkeypatch, capsys):
    import fp8ref.finetune as finetune

    monkeypatch.setattr(finetune, "compare", lambda *a, **k: pytest.fail("trained before checking --out"))
    (tmp_path / "run.json").mkdir()  # a folder where the JSON would go
    assert main(["finetune", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "run.json") in err and len(err.splitlines()) == 1, err
