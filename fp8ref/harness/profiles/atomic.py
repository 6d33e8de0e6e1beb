"""Write files whole or not at all: a temporary file in the same folder, renamed over the target;
and say before any work whether an output path can be written.

An interrupted or failed ``profile`` or ``finetune`` leaves no partial JSON or PNG: the rename is
atomic on POSIX and Windows filesystems (``os.replace``), and the temporary file is removed when
the writer fails. A symbolic link is written through: its target is replaced whole, in the
target's folder, and the link stays a link (a ``-installs.json`` linked into a shared folder
updates the shared file). A file that is replaced keeps its permission bits; a new one gets the
user's umask, as ``open(path, "w")`` would give it.

``check_writable`` is the one check of an output path (``profile --out``, ``accept``'s installs
file, ``--fp8-report``, ``--fp8-update-golden``, ``finetune --out``, ``scripts/your_env.py
--report``): callers run it before the work, so a path that cannot be written is one error naming
the user's path at once, not a failure naming a temporary file after minutes of work. This module
imports only the standard library (``scripts/your_env.py`` loads it before fp8ref is installed).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["UnwritablePath", "check_writable", "replacing", "write_text"]


class UnwritablePath(OSError):
    """An output path that cannot be written; the message (one argument, so ``str`` is exactly
    it) names the user's path and why."""


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
    """None when files can be created in ``folder`` (it exists, or the nearest folder above it
    that exists lets it be created), else why not. ``os.access`` asks the kernel, so a read-only
    mount reads as unwritable for root too."""
    here = folder
    while not here.exists() and here != here.parent:
        if here.is_symlink():  # a dangling link on the way: mkdir would fail on it
            return f"{here} is a link to {os.readlink(here)}, which does not exist"
        here = here.parent
    if not here.is_dir():
        return f"{here} is not a folder"
    if not os.access(here, os.W_OK | os.X_OK):
        return f"the folder {here} is not writable" + ("" if here == folder else f" (to create {folder} in it)")
    return None


def check_writable(path: str | Path, what: str, *, folder: bool = False) -> Path:
    """Raise ``UnwritablePath`` (``what``: the option or file it is for, e.g. ``--out``) unless
    ``path`` can be written whole by ``replacing``: it is a regular file, a link to one, or does
    not exist yet (not a folder, a device, a FIFO or a socket); it is not read-only; its folder
    exists and is writable, or can be created. With ``folder``, ``path`` is a folder files will
    be written into: it must be a folder, or be creatable. Returns ``path``. Changes nothing."""
    if not str(path).strip():  # (an unset $VAR in a CI line)
        raise UnwritablePath(f"{what}: expected a path, got an empty value")
    path = Path(path)
    shown = f"{path}" if not path.is_symlink() else f"{path} (a link to {_target(path)})"
    if folder:
        target = _target(path)
        kind = _kind(target)
        if target.exists() and not target.is_dir():
            raise UnwritablePath(f"{what}: {shown} is {kind or 'a file'}, not a folder")
        problem = _folder_problem(target)
        if problem is not None:
            raise UnwritablePath(f"{what}: cannot write into {shown}: {problem}")
        return path
    target = _target(path)
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
    when the block ends without an exception it replaces that file, otherwise it is deleted. The
    folder is created if missing. A path that is not a regular file (a folder, a device) is
    refused before anything is written (``check_writable``)."""
    path = Path(path)
    check_writable(path, "output")
    target = _target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
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
