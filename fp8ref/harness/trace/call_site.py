"""Where in the user's code a traced op was called: the innermost stack frame that is not the
machinery between the user's line and the op, as ``file:line``.

What is machinery is told by where a frame's code lives, not by a list of library names, so a
library that wraps a module's forward (``kernels``, peft, deepspeed, a team's framework) is
skipped like torch is. The folders that decide (``_is_machinery``), the deepest one containing a
file winning and machinery winning a tie:

- the user's: the workloads fp8ref ships (``fp8ref/harness/workloads``: programs the tracer runs,
  their own lines the call sites of their ops), and the code of a traced target
  (``add_user_code``: ``trace.target.load_target`` adds the target's package), even where it is
  installed into site-packages;
- machinery: fp8ref's own package and torch's, torchao's, transformers' and accelerate's (wherever
  they live: an editable install keeps one in a checkout), every installed-packages folder
  (site-packages, dist-packages), Python's own library, the code torch.compile generated
  (``torchinductor_*``), code downloaded from the Hugging Face Hub (its cache: hub kernels,
  ``trust_remote_code`` models), and the packages of a distribution installed from a checkout
  (an editable install of a wrapper library) unless the checkout lies under the folder the user
  runs from, or that folder inside it (their own project, ``pip install -e .``).

Code under none of them (a script, a team's folder) is the user's; so is ``<string>`` or
``<stdin>``, while ``<frozen ...>`` and ``<eval_with_key>`` (the code torch.fx generates) are not.
``only_user_code`` narrows the user's code to some folders for a block: a shipped workload's
trace names no line outside its own folder, whatever library added a frame."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from functools import cache
from urllib.parse import unquote, urlparse

__all__ = ["call_site", "call_chain", "NO_SITE", "add_user_code", "only_user_code", "forget"]

# libraries kept by name too: an editable install of one lives outside any site-packages folder
_LIBRARIES = ("torch", "torchao", "transformers", "accelerate", "fp8ref")

# an op no user frame is on the stack of (the autograd engine's device threads run the backward of
# CUDA tensors there; a C++ caller)
NO_SITE = "<no frame of the user's code: every frame is a library's, Python's or fp8ref's>"

# fp8ref's own package, whatever name it was imported under, and fp8ref/harness/workloads/: the one
# folder of fp8ref whose lines are a user's
_FP8REF = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))) + os.sep
_SHIPPED_WORKLOADS = os.path.join(_FP8REF, "harness", "workloads") + os.sep

# path components under which every file is installed or generated code, whatever folder holds them
_INSTALLED = ("site-packages", "dist-packages")
_GENERATED = "torchinductor_"  # (torch.compile's cache: {tempdir}/torchinductor_{user}/...)

_user_roots: set[str] = set()  # folders (ending in os.sep) and files add_user_code was given
_only: tuple[str, ...] | None = None  # only_user_code's roots while its block runs


def _folder(path: str) -> str:
    return os.path.join(os.path.realpath(path), "")


def add_user_code(path: str | os.PathLike[str]) -> None:
    """Count the code at ``path`` (one module's file, or else a folder: a package's) as the user's for the
    rest of the process, even inside a folder that is otherwise machinery (a team's package
    installed into site-packages). A folder that is itself machinery's (site-packages, torch's)
    wins over it: name the module's file to count that file alone."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a folder or file path, got {type(path).__name__}")
    real = os.path.realpath(path)
    _user_roots.add(real if os.path.isfile(real) else _folder(real))
    _is_machinery.cache_clear()


@contextlib.contextmanager
def only_user_code(*paths: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, the code at ``paths`` (files, or else folders) alone is the user's, and
    every other frame is machinery: for a program whose own code is known (a shipped workload),
    whatever another library, wherever installed, puts between its lines and the op."""
    global _only
    if not paths or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise TypeError(f"paths: expected one or more folder or file paths, got {paths!r}")
    real = [os.path.realpath(p) for p in paths]
    before, _only = _only, tuple(p if os.path.isfile(p) else _folder(p) for p in real)
    try:
        yield
    finally:
        _only = before


def _deepest(path: str, roots: Iterable[str]) -> int:
    """The length of the longest of ``roots`` holding ``path`` (a folder ending in ``os.sep``
    holds what is under it, a file itself), -1 when none does: of two roots holding a path, the
    longer lies inside the other."""
    holding = [r for r in roots if (path.startswith(r) if r.endswith(os.sep) else path == r)]
    return max(map(len, holding), default=-1)


def _under_component(path: str) -> int:
    """The length of ``path``'s prefix through its last installed-packages or generated-code
    folder (``.../site-packages/``, ``.../torchinductor_me/``), -1 when it has none."""
    parts = path.split(os.sep)
    for i in range(len(parts) - 2, -1, -1):  # (the file's own name is no folder)
        if parts[i] in _INSTALLED or parts[i].startswith(_GENERATED):
            return len(os.sep.join(parts[: i + 1])) + len(os.sep)
    return -1


@cache
def _library_folders() -> tuple[str, ...]:
    folders = [_FP8REF]
    for name in _LIBRARIES:
        try:
            spec = sys.modules[name].__spec__ if name in sys.modules else importlib.util.find_spec(name)
        except (ImportError, ValueError):  # (a module without a spec: no folder to name)
            spec = None
        folders += [_folder(where) for where in (spec.submodule_search_locations or [])] if spec else []
    return tuple(folders)


@cache
def _installed_folders() -> tuple[str, ...]:
    """Where packages are installed (some under no ``site-packages`` name) and Python's own
    library (contextlib, functools: the decorators between a user and torch)."""
    found = [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    with contextlib.suppress(AttributeError):  # (site trimmed by an embedding)
        found += [*site.getsitepackages(), site.getusersitepackages()]
    return tuple({_folder(f) for f in found if f})


@cache
def _downloaded_folders() -> tuple[str, ...]:
    """Where code downloaded from the Hugging Face Hub is imported from (read as huggingface_hub,
    transformers and kernels read them, none imported here): a hub kernel's layer ``kernels``
    puts in place of a forward, a model's ``trust_remote_code`` modules."""
    env = os.environ.get
    home = env("HF_HOME") or os.path.join(env("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    found = [
        home,
        *(env(name) for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_MODULES_CACHE", "KERNELS_CACHE")),
    ]
    return tuple({_folder(os.path.expandvars(os.path.expanduser(f))) for f in found if f})


@cache
def _checkout_folders() -> tuple[str, ...]:
    """Where the code of distributions installed from a checkout lives (an editable install: its
    ``direct_url.json``; an older ``setup.py develop``: its metadata beside the code): the
    folders of its top-level packages (``top_level.txt``; the checkout's tests and examples are
    programs run against it), else the whole checkout. Not the checkout the user runs from."""
    try:
        here = _folder(os.getcwd())
    except OSError:  # (the folder it runs from was removed: none is the user's project)
        here = os.sep
    found: set[str] = set()
    try:
        for dist in importlib.metadata.distributions():
            try:
                found.update(_checkout_code(dist, here))
            except Exception:  # noqa: BLE001 - one broken install (or a finder of no folders): the others still count
                continue
    except Exception:  # noqa: BLE001 - a broken metadata finder: the other rules still stand
        return ()
    return tuple(found)


def _checkout_code(dist: importlib.metadata.Distribution, here: str) -> list[str]:
    url = json.loads(dist.read_text("direct_url.json") or "{}")
    if url.get("dir_info", {}).get("editable") and urlparse(url.get("url", "")).scheme == "file":
        project = _folder(unquote(urlparse(url["url"]).path))
    else:
        project = _folder(str(dist.locate_file("")))  # (the folder holding its metadata)
        if _deepest(project, _installed_folders()) >= 0 or _under_component(project) >= 0:
            return []  # (installed: the installed folders' rule)
    # (a checkout the user runs from, or one inside the folder they run from, is their own project;
    # the file system's root holds everything, so running from there says nothing)
    if project == os.sep or here.startswith(project) or (here != os.sep and project.startswith(here)):
        return []
    names = (dist.read_text("top_level.txt") or "").split()
    if not names:
        return [project]
    code = []
    for name in names:
        spec = sys.modules[name].__spec__ if name in sys.modules else importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            code += [_folder(where) for where in spec.submodule_search_locations]
        elif spec is not None and spec.origin:
            code.append(os.path.realpath(spec.origin))
    return [where for where in code if where.startswith(project)]  # (a name another install answers: not this code)


@cache
def _is_machinery(filename: str) -> bool:
    if filename.startswith("<"):  # "<string>", "<stdin>": code a user ran
        # <frozen importlib._bootstrap>; <eval_with_key>.N: the code torch.fx generates for a
        # GraphModule (the user's line is the one that called the module)
        return filename.startswith(("<frozen", "<eval_with_key>"))
    path = os.path.realpath(filename)
    users = _deepest(path, (_SHIPPED_WORKLOADS, *_user_roots))
    machinery = max(
        _deepest(path, (*_library_folders(), *_installed_folders(), *_downloaded_folders(), *_checkout_folders())),
        _under_component(path),
    )
    return machinery >= 0 and machinery >= users  # (under no folder either way: the user's)


@cache
def _outside(filename: str, only: tuple[str, ...]) -> bool:
    return _deepest(os.path.realpath(filename), only) < 0


def _users(filename: str) -> bool:
    only = _only
    return not (_outside(filename, only) if only is not None else _is_machinery(filename))


def call_site(skip: int = 1) -> str:
    """``file:line`` of the innermost frame (past the ``skip`` innermost) of the user's code (the
    module docstring says which is); ``NO_SITE`` when none is."""
    frame = sys._getframe(skip)
    while frame is not None:
        if _users(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return NO_SITE


def call_chain(skip: int = 1, depth: int = 4) -> str:
    """``call_site``'s frame and its callers while they are the user's too (at most ``depth``),
    innermost first: ``file:line <- file:line``. A cast in a team's helper names the helper's line
    and the line that called it, where the bug usually is; ``NO_SITE`` when no frame is the user's."""
    frame, chain = sys._getframe(skip), list[str]()
    while frame is not None and len(chain) < depth:
        if _users(frame.f_code.co_filename):
            chain.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
        elif chain:  # (the user's innermost run of frames ends at the first library frame)
            break
        frame = frame.f_back  # type: ignore[assignment]
    return " <- ".join(chain) or NO_SITE


def forget() -> None:
    """Forget what was worked out (the folders, each file's verdict) and what ``add_user_code``
    was given: a process whose working folder, installs or ``sys.path`` changed (tests)."""
    _user_roots.clear()
    for cached in (
        _library_folders,
        _installed_folders,
        _downloaded_folders,
        _checkout_folders,
        _is_machinery,
        _outside,
    ):
        cached.cache_clear()
