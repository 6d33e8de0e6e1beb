"""Write files whole or not at all: a temporary file in the same folder, renamed over the target.

An interrupted or failed ``profile`` or ``finetune`` leaves no partial JSON or PNG: the rename is
atomic on POSIX and Windows filesystems (``os.replace``), and the temporary file is removed when
the writer fails.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["replacing", "write_text"]


def _umask() -> int:
    mask = os.umask(0)  # (the only way to read it is to set it)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an exception it
    replaces ``path``, otherwise it is deleted. The folder is created if missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    # mkstemp makes the file 0600, and the rename keeps that mode: give it the mode any new file
    # gets under the user's umask instead
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> Path:
    """``Path(path).write_text(text)``, atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text)
    return Path(path)
