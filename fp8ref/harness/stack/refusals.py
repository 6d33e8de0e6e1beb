"""When an install *refuses* an operation, and when an error is a bug.

An older torch without a CPU rowwise ``_scaled_mm``, a torchao that does not import with this
torch, a device without a dtype: these are facts about the install, to be reported (a profile
value, a test skipped with the versions), never a traceback. A mistake in fp8ref must still fail
loudly. The rule that tells them apart:

- An exception raised *inside the install* -- by code in torch, torchao, ml_dtypes, numpy,
  triton, safetensors or transformers, or by a native function they implement (a C++
  ``TORCH_CHECK`` surfaces in the Python frame that called it) -- is a refusal. Its text is
  what the install said.
- An exception raised by a ``raise`` or ``assert`` statement anywhere else (fp8ref's own argument
  checks, a test's helper) is a bug, and so is any exception that is not an ``Exception`` subclass
  (KeyboardInterrupt, SystemExit) or is ``MemoryError``.
- A native call that raises something other than the errors native torch code raises
  (RuntimeError and its subclasses, TypeError, ValueError, IndexError, AttributeError for a
  missing function or dtype) is a bug.
- A device fault is never a refusal, wherever it surfaces: an illegal memory access, a
  misaligned address, a launch failure, a device-side assert. It breaks the CUDA context, so
  every later call fails too; were it a refusal, every later probe would read "refused" and
  every later test would skip. Probes of a CUDA device synchronize inside the attempted call, so
  a fault surfaces in the call that caused it (``DEVICE_FAULTS``).

A refusal whose cause is a bug in fp8ref (passing a wrong argument to torch) is still reported,
and so still seen: the pinned value is ``ok`` or a digest, the new one ``refused: ...``.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

__all__ = [
    "INSTALL_PACKAGES",
    "NATIVE_REFUSALS",
    "DEVICE_FAULTS",
    "refusal",
    "is_refusal",
    "normalize",
    "describe",
    "attempt",
]

T = TypeVar("T")

# Packages whose code counts as "the install": an error raised from their files is their answer.
INSTALL_PACKAGES = ("torch", "torchao", "ml_dtypes", "numpy", "triton", "functorch", "safetensors", "transformers")

# What a native (C/C++) torch function raises when it refuses: c10::Error and friends map to these.
NATIVE_REFUSALS = (RuntimeError, TypeError, ValueError, IndexError, AttributeError)


# Messages of errors that break the CUDA context (CUDA runtime error strings as torch reports them).
DEVICE_FAULTS = re.compile(
    r"illegal memory access|misaligned address|unspecified launch failure|device-side assert"
    r"|illegal instruction|CUDA error: an illegal",
    re.IGNORECASE,
)


def _package_of(filename: str) -> str | None:
    """The top-level package a source file belongs to, when it is one of INSTALL_PACKAGES."""
    parts = Path(filename).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in INSTALL_PACKAGES and i + 1 < len(parts):
            # .../site-packages/torch/nn/functional.py -> torch; guard against a user's folder
            # that happens to be named torch by asking for a package marker next to it
            root = Path(*parts[: i + 1])
            if (root / "__init__.py").is_file():
                return parts[i]
    return None


def _innermost(exc: BaseException) -> TracebackType | None:
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _is_raise_statement(filename: str, lineno: int) -> bool:
    line = linecache.getline(filename, lineno).lstrip()
    return line.startswith(("raise", "assert"))


def is_refusal(exc: BaseException) -> bool:
    """True when ``exc`` is the install refusing an operation (see the module docstring)."""
    if not isinstance(exc, Exception) or isinstance(exc, MemoryError):
        return False
    if DEVICE_FAULTS.search(str(exc)):
        return False  # the device broke: a failure, and what follows it is not to be trusted
    tb = _innermost(exc)
    if tb is None:  # never raised (constructed by hand): nobody refused anything
        return False
    filename = tb.tb_frame.f_code.co_filename
    if _package_of(filename) is not None:
        return True
    if _is_raise_statement(filename, tb.tb_lineno):
        return False  # fp8ref's, or a caller's, own raise: a bug or a bad argument
    return isinstance(exc, NATIVE_REFUSALS)  # a native function called from this line said no


def normalize(message: str) -> str:
    """The first line of an install's error message without what varies between builds of the
    same behaviour (source paths and line numbers, torch's assert boilerplate), at most 240 chars."""
    lines = message.strip().splitlines()
    first = lines[0].strip() if lines else ""
    first = re.sub(r' at "[^"]*":\d+,?', "", first)
    first = first.replace(" please report a bug to PyTorch.", "").replace(" INTERNAL ASSERT FAILED", " failed:")
    first = re.sub(r" \((?:/|[A-Za-z]:\\)[^()]*\)$", "", first)  # "(/path/to/module.py)" after an ImportError
    return first if len(first) <= 240 else first[:237] + "..."


def describe(exc: BaseException) -> str:
    """``Type: message`` (``normalize``d), for a profile value or a skip reason."""
    first = normalize(str(exc))
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def refusal(exc: BaseException) -> str | None:
    """``'refused: Type: message'`` when ``exc`` is a refusal, else None."""
    return f"refused: {describe(exc)}" if is_refusal(exc) else None


def attempt(fn: Callable[[], T], device: str | None = None) -> tuple[bool, T | str]:
    """Call ``fn()``. ``(True, result)`` on success, ``(False, 'refused: ...')`` when the install
    refuses; any other exception (a bug, a device fault) propagates unchanged. With a CUDA
    ``device`` the call is synchronized before it counts as a success, so an asynchronous fault
    surfaces here, in the call that caused it."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable taking no arguments, got {type(fn).__name__}")
    try:
        result = fn()
        if device is not None and str(device).startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)
        return True, result
    except Exception as exc:  # noqa: BLE001 - classified below; non-refusals re-raised
        text = refusal(exc)
        if text is None:
            raise
        return False, text
