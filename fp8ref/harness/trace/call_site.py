"""Where in the user's code a traced op was called: the innermost stack frame outside torch,
torchao, transformers, accelerate, fp8ref and Python's own library, as ``file:line``. The workloads fp8ref ships
(``fp8ref/harness/workloads``) are programs the tracer runs, not its machinery: their own lines are
the call sites of their ops."""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from functools import cache

__all__ = ["call_site", "NO_SITE"]

# the packages whose frames are the machinery between the user's line and the op
_LIBRARIES = ("torch", "torchao", "transformers", "accelerate", "fp8ref")

# an op no user frame is on the stack of (the autograd engine's device threads run the backward of
# CUDA tensors there; a C++ caller)
NO_SITE = "<no frame outside torch, torchao, transformers, accelerate and fp8ref>"


@cache
def _library_folders() -> tuple[str, ...]:
    folders = []
    for name in _LIBRARIES:
        spec = sys.modules[name].__spec__ if name in sys.modules else importlib.util.find_spec(name)
        for where in (spec.submodule_search_locations or []) if spec else []:
            folders.append(os.path.realpath(where) + os.sep)
    return tuple(folders)


# fp8ref/harness/workloads/: the one folder of fp8ref whose lines are a user's
_SHIPPED_WORKLOADS = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "workloads") + os.sep


@cache
def _stdlib_folders() -> tuple[str, ...]:
    return tuple({os.path.realpath(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib")})


@cache
def _is_machinery(filename: str) -> bool:
    if filename.startswith("<"):  # "<string>", "<stdin>": code a user ran
        # <frozen importlib._bootstrap>; <eval_with_key>.N: the code torch.fx generates for a
        # GraphModule (the user's line is the one that called the module)
        return filename.startswith(("<frozen", "<eval_with_key>"))
    path = os.path.realpath(filename)
    if path.startswith(_SHIPPED_WORKLOADS):
        return False
    if f"{os.sep}torchinductor_" in path:  # (code torch.compile generated: the user's line called it)
        return True
    if path.startswith(_library_folders()):
        return True
    # the standard library (contextlib, functools: the decorators between a user and torch), but not
    # another library installed beside it
    installed = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
    return path.startswith(_stdlib_folders()) and not installed


def call_site(skip: int = 1) -> str:
    """``file:line`` of the innermost frame (past the ``skip`` innermost) that is not torch's,
    torchao's, transformers', accelerate's, fp8ref's or the standard library's; ``NO_SITE`` when
    none is."""
    frame = sys._getframe(skip)
    while frame is not None:
        if not _is_machinery(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return NO_SITE
