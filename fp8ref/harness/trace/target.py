"""The function a ``pkg.module:function`` target names, imported as ``python -m`` imports it: the
folder it is run from first on ``sys.path``. Shared by ``python -m fp8ref trace`` and the pytest
plugin's ``--fp8-workload``. The target's code is the user's from then on (``target_code``,
``call_site.add_user_code``): its lines are the call sites a trace names, wherever it is
installed."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from .call_site import add_user_code

__all__ = ["TargetError", "load_target", "target_code", "key_part"]


class TargetError(ValueError):
    """A target that names no callable: what is wrong with it, naming the target. ``inside``: the
    user's module raised while it loaded (its traceback is theirs to read)."""

    def __init__(self, message: str, inside: bool = False) -> None:
        super().__init__(message)
        self.inside = inside


def load_target(target: str, folder: str | os.PathLike[str] | None = None) -> Callable[..., Any]:
    """The callable ``target`` (``pkg.module:function``, or ``pkg.module:Class.method``) names,
    importing the module with ``folder`` (default: the current folder) first on ``sys.path``.
    ``TargetError`` names what is wrong: no ``:``, a module that cannot be imported, a missing
    attribute, an attribute that is not callable, a function that takes arguments. The target's
    code (``target_code``) counts as the user's in the call sites a trace names."""
    if not isinstance(target, str):
        raise TypeError(f"target: expected 'pkg.module:function' (str), got {type(target).__name__}")
    module_name, colon, name = target.partition(":")
    if not colon or not module_name or not name:
        raise TargetError(f"target {target!r}: expected pkg.module:function (a module, ':', a function in it)")
    where = os.fspath(folder) if folder is not None else os.getcwd()
    if where not in sys.path and not (folder is None and "" in sys.path):
        sys.path.insert(0, where)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - the user's module, whatever it raises while it loads
        missing = isinstance(exc, ModuleNotFoundError) and f"{module_name}.".startswith(f"{exc.name}.")
        raise TargetError(
            f"target {target!r}: module {module_name!r} cannot be imported ({type(exc).__name__}: {exc})",
            inside=not missing,
        ) from exc
    fn: Any = module
    for part in name.split("."):
        if not hasattr(fn, part):
            raise TargetError(f"target {target!r}: module {module_name!r} has no attribute {name!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise TargetError(f"target {target!r}: {name!r} is not callable ({type(fn).__name__}), expected a function")
    try:
        inspect.signature(fn).bind()
    except TypeError:  # (it is called with no arguments)
        raise TargetError(
            f"target {target!r}: {name}{inspect.signature(fn)} takes arguments, expected a function called with none"
        ) from None
    except ValueError:  # (no signature to read: a builtin; the call says)
        pass
    for path in target_code(module_name):
        add_user_code(path)
    return fn


def target_code(module_name: str) -> list[str]:
    """Where the code of the imported module ``module_name`` lives, the user's own: the folder of
    its outermost regular package (``team.train.step``: ``team/``; past namespace packages, which
    other distributions share), or for a module in no package its folder and its file (the file
    alone stays the user's where that folder is site-packages'). Empty for a module of no file."""
    parts = module_name.split(".")
    for depth in range(1, len(parts) + 1):
        module = sys.modules.get(".".join(parts[:depth]))
        file = getattr(module, "__file__", None)
        if module is None or not isinstance(file, str):  # (a namespace package: look deeper)
            continue
        if hasattr(module, "__path__"):  # (a regular package: its folder)
            return [os.path.dirname(file)]
        return [os.path.dirname(file), file]
    return []


def key_part(text: str) -> str:
    """``text`` as one part of a profile key: each run of characters other than letters, digits,
    ``_``, ``-``, ``+`` and ``:`` made one ``_``, none at either end (``mypkg.train:step`` is
    ``mypkg_train:step``): a team's target in its golden's keys."""
    return re.sub(r"[^A-Za-z0-9_+:-]+", "_", text).strip("_")
