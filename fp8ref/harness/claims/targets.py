"""A team's claims as a ``pkg.module:function`` target: the function takes no arguments and
returns its claims' results (``check_cast_claim(...) + check_delayed_scaling_claim(...)``). The
pytest plugin's ``--fp8-claims`` and ``python -m fp8ref profile --claims`` name such targets; their
results fail the run where they differ from the definition and join the team's golden
(``profile_keys``)."""

from __future__ import annotations

import os
from functools import cache

from ..trace.target import TargetError, load_target
from .results import ClaimResult

__all__ = ["claim_results", "forget", "checked_targets", "TargetError"]


@cache
def _results(target: str, folder: str) -> tuple[ClaimResult, ...]:
    got = load_target(target, folder)()
    if not isinstance(got, (list, tuple)) or not all(isinstance(r, ClaimResult) for r in got):
        kinds = sorted({type(r).__name__ for r in got}) if isinstance(got, (list, tuple)) else type(got).__name__
        raise TargetError(f"target {target!r}: expected a list of ClaimResult (from check_*_claim), got {kinds}")
    if not got:
        raise TargetError(f"target {target!r}: returned no results, so nothing was checked")
    from .profile_keys import keys

    try:
        keys(target, list(got))
    except ValueError as exc:  # (two functions held to one claim: told apart by label=)
        raise TargetError(f"target {target!r}: {exc}; give each function its label= in check_*_claim") from exc
    return tuple(got)


def claim_results(target: str, folder: str | os.PathLike[str] | None = None) -> list[ClaimResult]:
    """The results ``target``'s function returns (called once per process and folder), its module
    imported with ``folder`` (default: the current one) first on ``sys.path``. ``TargetError``
    names a target that is not there, or a function that returns no list of ``ClaimResult``."""
    return list(_results(target, os.fspath(folder) if folder is not None else os.getcwd()))


def checked_targets(claims: object) -> tuple[str, ...]:
    """``claims`` as a tuple of ``pkg.module:function`` targets, or a TypeError naming it."""
    if isinstance(claims, str) or not isinstance(claims, (list, tuple)) or not all(isinstance(t, str) for t in claims):
        raise TypeError(f"claims: expected a list or tuple of 'pkg.module:function' targets, got {claims!r}")
    return tuple(claims)


def forget() -> None:
    """Forget the results kept: the next ``claim_results`` runs the team's function again."""
    _results.cache_clear()
