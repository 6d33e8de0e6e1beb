"""Run a module as if some packages were not installed: ``python -m tests.common.hidden_packages
numpy,hypothesis -m fp8ref profile --out P`` (or ``... PKGS path/to/script.py ARGS``). No import
finder finds a hidden package (``importlib.util.find_spec`` answers None, an import raises
``ModuleNotFoundError``), as for one that is not installed; only its distribution metadata stays. For the checks
that fp8ref's own needs (``fp8ref.harness.stack.refusals.OWN_NEEDS``) never read as the install's
answers."""

from __future__ import annotations

import importlib.abc
import runpy
import sys
from collections.abc import Sequence
from typing import Any


class Hidden(importlib.abc.MetaPathFinder):
    """One of ``sys.meta_path``'s finders that no longer finds ``names``: its ``find_spec`` answers
    None for them, as every finder does for a package that is not installed."""

    def __init__(self, finder: Any, names: frozenset[str]) -> None:
        self.finder, self.names = finder, names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".")[0] in self.names:
            return None
        return self.finder.find_spec(fullname, path, target)

    def invalidate_caches(self) -> None:
        getattr(self.finder, "invalidate_caches", lambda: None)()

    def __getattr__(self, name: str) -> Any:  # (find_distributions: the metadata stays found)
        return getattr(self.finder, name)


def hide(names: Sequence[str]) -> None:
    """From now on in this process, ``names`` are not found (those already imported are dropped)."""
    hidden = frozenset(names)
    for mod in [m for m in sys.modules if m.split(".")[0] in hidden]:
        del sys.modules[mod]
    sys.meta_path[:] = [Hidden(f, hidden) for f in sys.meta_path]


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: python -m tests.common.hidden_packages PKG[,PKG...] (-m MODULE | SCRIPT) [ARGS...]")
    hide([n for n in argv[0].split(",") if n])
    if argv[1] == "-m":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv[1:]
        runpy.run_path(argv[1], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
