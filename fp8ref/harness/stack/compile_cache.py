"""torch.compile's on-disk caches, one folder per install, so a compiled check judges the code
installed now.

Inductor keeps what it compiled on disk (``TORCHINDUCTOR_CACHE_DIR``: its FX graph cache,
AOTAutograd's cache, the CPU ISA checks, Triton's kernels) and reuses it in later processes. Its
keys hash torch's own sources, but not the code *inside* a tensor subclass's
``__torch_dispatch__`` (AOTAutograd hashes such a subclass by its type and metadata unless it
implements ``_stable_hash_for_caching``; torch warns that torchao's ``OptimStateFp8`` does not).
So after torchao or transformers change in place, a warm cache can replay a graph traced through
their old code, and a compiled check passes on code that is no longer installed.

``install_key`` is a digest of the versions and the source files (path, size, modification time)
of the packages whose code a compiled check traces through; ``use_install_cache`` points the
caches at a folder named after it, under the folder the user chose (``TORCHINDUCTOR_CACHE_DIR``)
or torch's default. An unchanged install finds its folder warm; any change of those files gets a
new, empty one. ``FP8REF_COMPILE_CACHE=shared`` turns the keying off (the folder is used as it is).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["KEYED_PACKAGES", "install_key", "keyed_cache_dir", "use_install_cache"]

# the packages whose code a compiled FP8 path traces through: torch, its compiler's kernels
# (triton) and the FP8 libraries checked (fp8ref's own functions are traced into the graphs, which
# inductor hashes)
KEYED_PACKAGES = ("torch", "triton", "torchao", "transformers")
_SOURCES = (".py", ".so", ".pyd")
_ENV = "TORCHINDUCTOR_CACHE_DIR"
_BASE_ENV = "FP8REF_COMPILE_CACHE_BASE"  # the user's folder, kept for processes this one starts


def _package_root(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def install_key(packages: Iterable[str] = KEYED_PACKAGES) -> str:
    """A digest of each package's location and of every source file under it (relative path,
    size, modification time): 16 hex digits. Reading no file's contents keeps it fast (some 6,000
    files in 0.1-0.2 s); an in-place upgrade or an edited file changes a size or a time."""
    h = hashlib.sha256()
    for name in packages:
        root = _package_root(name)
        h.update(f"{name}={root}\n".encode())
        if root is None:
            continue
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(_SOURCES):
                    path = os.path.join(folder, f)
                    try:
                        st = os.stat(path)
                    except OSError:  # (a file removed while walking: the install is changing)
                        continue
                    h.update(f"{os.path.relpath(path, root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _default_base() -> str:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        return default_cache_dir()
    except ImportError:  # (a torch without it: the same place it has always used)
        return os.path.join(tempfile.gettempdir(), "torchinductor_" + os.environ.get("USER", "user"))


def keyed_cache_dir(base: str | os.PathLike[str] | None = None, key: str | None = None) -> Path:
    """``<base>/fp8ref-<install_key()>``: the cache folder of this install under ``base``
    (default: torch's own default folder)."""
    return Path(base if base is not None else _default_base()) / f"fp8ref-{key or install_key()}"


def use_install_cache(environ: dict[str, str] | None = None) -> Path | None:
    """Point torch.compile's caches at this install's folder (``keyed_cache_dir`` under the
    folder ``TORCHINDUCTOR_CACHE_DIR`` names, or torch's default) by setting the variable, which
    inductor reads whenever it looks for a cache, and which processes started later inherit. Call
    it before anything compiles. Returns the folder, or None with ``FP8REF_COMPILE_CACHE=shared``."""
    env = os.environ if environ is None else environ
    if env.get("FP8REF_COMPILE_CACHE") == "shared":
        return None
    base = env.get(_BASE_ENV) or env.get(_ENV)
    if base and Path(base).name.startswith("fp8ref-"):  # (already keyed, by a parent process)
        base = str(Path(base).parent)
    env[_BASE_ENV] = base or _default_base()
    folder = keyed_cache_dir(env[_BASE_ENV])
    env[_ENV] = str(folder)
    return folder
