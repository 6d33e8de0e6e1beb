"""The files fp8ref writes for its users: a write through a symbolic link updates the link's
target and leaves the link a link; a path that is not a regular file (a folder, a device, a FIFO)
is never replaced; and every output path (``profile --out``, ``finetune --out``'s JSON and PNG,
``accept``'s installs file, ``--fp8-report``, ``--fp8-update-golden``'s golden,
``scripts/your_env.py --report``) is checked before the work, with one error naming the user's
path (``atomic.check_writable``): its folder must exist (none is ever created) and take files."""

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
from tests.common.beside import fp8ref_main_each, main_each_report, pytest_each, pytest_each_result
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


def test_a_missing_folder_is_refused_and_never_created(tmp_path):
    """A typo in an output's folder would otherwise become a new tree of folders holding the
    only copy: the folder must exist, and neither the check nor the write creates it."""
    path = tmp_path / "new" / "deeper" / "out.json"
    with pytest.raises(atomic.UnwritablePath) as refused:
        atomic.check_writable(path, "--out")
    assert str(refused.value) == (
        f"--out: cannot write {path}: the folder {tmp_path / 'new' / 'deeper'} does not exist "
        "(fp8ref creates no folders: create it first)"
    )
    with pytest.raises(atomic.UnwritablePath):
        atomic.write_text(path, "x")
    assert not (tmp_path / "new").exists(), "a folder was created"
    with pytest.raises(atomic.UnwritablePath, match="does not exist"):
        atomic.check_writable(tmp_path / "new", "--fp8-golden", folder=True)  # (a folder of goldens too)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ["/proc", "/sys"])
def test_a_folder_that_takes_no_files_is_refused_also_for_root(folder):
    """Root passes ``os.access`` everywhere, yet no file can be created in /proc or /sys: the
    check asks the system. Before: ``profile --out /proc/nope.json`` collected for 54 s, then
    failed naming a temporary file."""
    if not Path(folder).is_dir() or _writes(Path(folder)):
        pytest.skip(f"{folder}: not a folder that refuses new files on this system ({sys.platform})")
    path = f"{folder}/fp8ref-nope.json"
    with pytest.raises(atomic.UnwritablePath) as refused:
        atomic.check_writable(path, "--out")
    assert str(refused.value).startswith(f"--out: cannot write {path}: no file can be created in the folder {folder} (")
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, OSError)  # (callers catch either)
    assert not os.path.exists(path)


def test_the_path_is_named_as_given(tmp_path, monkeypatch):
    """``./out/x.json`` stays ``./out/x.json`` in the message (pathlib would drop the ``./``)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(atomic.UnwritablePath) as refused:
        atomic.check_writable("./out//x.json", "--out")
    assert str(refused.value).startswith("--out: cannot write ./out//x.json: the folder out does not exist")


def test_an_empty_path_is_refused():
    with pytest.raises(atomic.UnwritablePath, match="--fp8-report: expected a path, got an empty value"):
        atomic.check_writable("", "--fp8-report")


# --- the command line: checked before the work, one error line ----------------------------------


@pytest.mark.parametrize("kind", ["fifo", "device"])  # (the other kinds: REFUSED below, for each command)
def test_profile_out_that_cannot_be_written_is_one_error_before_collecting(kind, tmp_path, monkeypatch, capsys):
    """Before: ``profile --out /dev/null`` replaced the device node with a JSON file."""
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


# --- every output of the command line: refused before the work, nothing created -----------------

REFUSED = ["missing folder", "/proc", "/sys", "a folder", "under a file"]


def _refused(kind: str, folder: Path, name: str) -> tuple[str, str]:
    """An output path named ``name`` that the command line must refuse, as the user would give
    it, and how its refusal starts after ``WHAT: `` (the system's reason for /proc and /sys is
    its own words)."""
    if kind == "missing folder":
        path = folder / "no-such-folder" / name
        return str(path), f"cannot write {path}: the folder {path.parent} does not exist (fp8ref creates no folders"
    if kind in ("/proc", "/sys"):
        if not Path(kind).is_dir() or _writes(Path(kind)):
            pytest.skip(f"{kind}: not a folder that refuses new files on this system ({sys.platform})")
        given = f"{kind}/fp8ref-{name}"
        return given, f"cannot write {given}: no file can be created in the folder {kind} ("
    if kind == "a folder":
        (folder / name).mkdir()
        return str(folder / name), f"{folder / name} is a folder, not a regular file"
    if kind == "under a file":
        (folder / "a-file").write_text("")
        path = folder / "a-file" / name
        return str(path), f"cannot write {path}: {folder / 'a-file'} is not a folder"
    raise ValueError(f"kind: {kind!r}")


def _tree(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*"))


def _one_error(capsys: pytest.CaptureFixture[str], starts: str) -> None:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), (starts, lines)


@pytest.mark.parametrize("kind", REFUSED)
def test_profile_out_is_refused_before_collecting_and_creates_nothing(kind, tmp_path, monkeypatch, capsys):
    """Before: ``--out /proc/nope.json`` collected for 54 s, then failed naming a temporary file;
    ``--out /nonexistent/dir/x.json`` created the folders."""
    path, words = _refused(kind, tmp_path, "out.json")
    before = _tree(tmp_path)
    monkeypatch.setattr(
        fp8ref.harness.profiles.profile, "collect", lambda *a, **k: pytest.fail("collected before checking --out")
    )
    assert main(["profile", "--out", path]) == 2
    _one_error(capsys, f"--out: {words}")
    assert _tree(tmp_path) == before and (kind == "a folder" or not os.path.exists(path))


@pytest.mark.parametrize("kind", REFUSED)
def test_finetune_out_is_refused_before_training_and_creates_nothing(kind, tmp_path, monkeypatch, capsys):
    """``--out PREFIX`` writes PREFIX.json: its folder is checked before a step is trained."""
    import fp8ref.finetune as finetune

    path, words = _refused(kind, tmp_path, "run.json")
    before = _tree(tmp_path)
    monkeypatch.setattr(finetune, "compare", lambda *a, **k: pytest.fail("trained before checking --out"))
    assert main(["finetune", "--out", path.removesuffix(".json"), "--no-progress"]) == 2
    _one_error(capsys, f"--out: {words}")
    assert _tree(tmp_path) == before and (kind == "a folder" or not os.path.exists(path))


def test_finetune_png_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch, capsys):
    """PREFIX.png is checked with PREFIX.json (unless --no-plot: then it is not written)."""
    import fp8ref.finetune as finetune

    monkeypatch.setattr(finetune, "compare", lambda *a, **k: pytest.fail("trained before checking --out"))
    (tmp_path / "run.png").mkdir()
    assert main(["finetune", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    _one_error(capsys, f"--out: {tmp_path / 'run.png'} is a folder, not a regular file")
    assert _tree(tmp_path) == [str(tmp_path / "run.png")]


@pytest.mark.parametrize("kind", REFUSED)
def test_accept_refuses_an_installs_file_that_cannot_be_written_and_creates_nothing(kind, tmp_path, capsys):
    """The installs file beside the golden, or where a link in its place leads (a shared folder
    that is gone, or a place that takes no files): refused before the diff, nothing written."""
    golden, now = _profiles(tmp_path)
    installs = tmp_path / "fp8-stack-installs.json"
    if kind == "a folder":
        installs.mkdir()
        words = f"{installs} is a folder, not a regular file"
    else:
        target, why = _refused(kind, tmp_path, "shared-installs.json")
        installs.symlink_to(target)
        words = why.replace(f"cannot write {target}", f"cannot write {installs} (a link to {target})")
    before = _tree(tmp_path)
    assert main(["accept", str(golden), str(now), "--why", "our loss scaler clips first"]) == 2
    _one_error(capsys, f"accept: {words}")
    assert _tree(tmp_path) == before


def test_a_refused_output_is_told_before_torch_is_imported(beside):
    """The refusal comes at once (no torch import, no collection) from a fresh interpreter."""
    report = main_each_report(beside("refusals"))
    for call, (code, err, _) in report["calls"].items():
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "no-such-folder" in lines[0], (call, code, err)
    assert "torch" not in report["modules"], [m for m in report["modules"] if m.startswith("fp8ref")]


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
    # a folder that is not there is not created: the user's typo would hold the only copy
    with pytest.raises(pytest.UsageError, match=re.escape(f"the folder {tmp_path / 'ci'} does not exist")):
        _check(fp8_golden=str(tmp_path / "ci" / "stack.json"), fp8_update_golden=True)
    (tmp_path / "ci").mkdir()
    _check(fp8_golden=str(tmp_path / "ci" / "stack.json"), fp8_update_golden=True)
    with pytest.raises(pytest.UsageError, match="goldens does not exist"):  # a folder of goldens: none made either
        _check(fp8_golden=str(tmp_path / "ci" / "goldens"), fp8_update_golden=True)
    _check(fp8_golden=str(tmp_path / "a-file" / "stack.json"))  # read only: nothing to write
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "ci"] and not any((tmp_path / "ci").iterdir())


@pytest.mark.parametrize("kind", ["folder", "fifo", "under a file"])
def test_a_report_path_that_cannot_be_written_is_a_usage_error(kind, tmp_path):
    path, message = _unwritable(kind, tmp_path)
    with pytest.raises(pytest.UsageError) as refused:
        _check(fp8_report=str(path))
    assert str(refused.value) == f"--fp8-report: {message}"


def run_beside(folder):
    """pytest as a user runs it, with a report path under a file: it must stop at configure; and
    the command line's refusals in a fresh interpreter (what they imported)."""
    gone = folder / "no-such-folder"
    refusals = {
        "profile": ["profile", "--out", str(gone / "profile.json")],
        "finetune": ["finetune", "--out", str(gone / "run"), "--no-progress"],
    }
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
    return {
        "runs": pytest_each({"report under a file": {"argv": argv, "cwd": str(folder)}}),
        "refusals": fp8ref_main_each(refusals),
    }


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
