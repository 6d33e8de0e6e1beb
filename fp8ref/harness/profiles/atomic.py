"""Write files whole or not at all: a temporary file in the same folder, renamed over the target;
and say before any work whether an output path can be written.

An interrupted or failed ``profile`` or ``finetune`` leaves no partial JSON or PNG: the rename is
atomic on POSIX and Windows filesystems (``os.replace``), and the temporary file is removed when
the writer fails. A symbolic link is written through: its target is replaced whole, in the
target's folder, and the link stays a link (a ``-installs.json`` linked into a shared folder
updates the shared file). A file that is replaced keeps its permission bits; a new one gets the
user's umask, as ``open(path, "w")`` would give it. No folder is ever created: an output's folder
must exist (a typo in it would otherwise become a new tree of folders holding the only copy).

``check_writable(path, what)`` is the one check of an output path (``profile --out``, ``accept``'s
installs file, ``finetune --out``'s JSON and PNG, ``--fp8-report``, ``--fp8-update-golden``,
``scripts/your_env.py --report``): callers run it before the work, so a path that cannot be
written is one error naming the user's path as given at once, not a failure naming a temporary
file after minutes of work. It raises ``UnwritablePath`` (an ``OSError`` and a ``ValueError``:
catch either) whose ``str`` is the whole message, ``WHAT: PATH ...``; it creates nothing. This
module imports only the standard library (``scripts/your_env.py`` loads it before fp8ref is
installed, and the command line checks before importing torch).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["UnwritablePath", "check_writable", "replacing", "write_text"]


class UnwritablePath(OSError, ValueError):
    """An output path that cannot be written; the message (one argument, so ``str`` is exactly
    it) names the user's path and why. Both an ``OSError`` (what the system would have raised at
    the write) and a ``ValueError`` (a bad argument, refused before the work)."""


# what a path that exists but is not a regular file is, in words (stat's S_IS* tests)
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _target(path: Path) -> Path:
    """Where a write to ``path`` lands: ``path``, or the file its symbolic links lead to (which
    need not exist yet)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _kind(path: Path) -> str | None:
    """None when ``path`` does not exist or is a regular file, else what it is, in words."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # (its folder's check says why, if it matters)
        return None
    if stat.S_ISREG(mode):
        return None
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def _folder_problem(folder: Path) -> str | None:
    """None when a file can be created in ``folder``, else why not. It must exist (no folder is
    created) and be a folder. ``os.access`` answers for a user without write permission; root
    passes it everywhere, so a file is then created and removed at once, and the system's refusal
    (/proc, /sys, a read-only mount) is the answer."""
    if folder.is_symlink() and not folder.exists():
        return f"the folder {folder} is a link to {os.readlink(folder)}, which does not exist"
    if not folder.exists():
        return f"the folder {folder} does not exist (fp8ref creates no folders: create it first)"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    try:
        fd, probe = tempfile.mkstemp(prefix=".fp8ref-probe.", dir=folder)
    except OSError as exc:
        return f"no file can be created in the folder {folder} ({exc.strerror or exc})"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def check_writable(path: str | os.PathLike[str], what: str, *, folder: bool = False) -> Path:
    """Raise ``UnwritablePath`` (``what``: the option or file it is for, e.g. ``--out``; the
    message starts ``WHAT: `` and names ``path`` as given) unless ``path`` can be written whole by
    ``replacing``: it is a regular file, a link to one, or does not exist yet (not a folder, a
    device, a FIFO or a socket); it is not read-only; its folder exists and files can be created
    in it. With ``folder``, ``path`` is a folder files will be written into: it must exist, be a
    folder and take new files. Returns ``Path(path)``. Leaves nothing behind (nor any folder)."""
    given = os.fspath(path)
    if not given.strip():  # (an unset $VAR in a CI line)
        raise UnwritablePath(f"{what}: expected a path, got an empty value")
    path = Path(given)
    shown = given if not path.is_symlink() else f"{given} (a link to {_target(path)})"
    target = _target(path)
    if folder:
        if target.exists() and not target.is_dir():
            raise UnwritablePath(f"{what}: {shown} is {_kind(target) or 'a file'}, not a folder")
        problem = _folder_problem(target)
        if problem is not None:
            raise UnwritablePath(f"{what}: cannot write into {shown}: {problem}")
        return path
    kind = _kind(target)
    if kind is not None:
        raise UnwritablePath(f"{what}: {shown} is {kind}, not a regular file")
    problem = _folder_problem(target.parent)
    if problem is not None:
        raise UnwritablePath(f"{what}: cannot write {shown}: {problem}")
    if target.exists() and not os.access(target, os.W_OK):
        raise UnwritablePath(f"{what}: {shown} is read-only")
    return path


def _umask() -> int:
    mask = os.umask(0)  # (the only way to read it is to set it)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside the file ``path`` names (beside the target of a link);
    when the block ends without an exception it replaces that file, otherwise it is deleted. A
    path that cannot be written (not a regular file, its folder missing or unwritable) is refused
    before anything is written (``check_writable``); no folder is created."""
    path = Path(path)
    check_writable(path, "output")
    target = _target(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent)
    os.close(fd)
    # mkstemp makes the file 0600, and the rename keeps that mode: give it the mode of the file it
    # replaces, or the one any new file gets under the user's umask
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    os.chmod(tmp, mode)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> Path:
    """``Path(path).write_text(text)``, atomically (through a link to its target)."""
    with replacing(path) as tmp:
        tmp.write_text(text)
    return Path(path)
