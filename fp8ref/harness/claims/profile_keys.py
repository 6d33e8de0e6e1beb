"""The claims family's profile keys (``claim.*``): a team's claims (``targets``) as keys of the
team's own golden, one per case: ``claim.<target>.<claim>.<case>``, in each part every run of
characters other than letters, digits, ``_``, ``-``, ``+`` and ``:`` made one ``_``, none at
either end. Its value: ``passed``, ``differs: <the
first difference>`` (a known failure too: the golden pins what the code does, the known file why
it is accepted), or ``missing: <why>`` (a case that did not run). Collected only for the targets a
profile is asked for (``Where.claims``): fp8ref's own goldens hold none."""

from __future__ import annotations

import os

from ..stack.probing import Where
from ..trace.target import key_part as _part
from .results import ClaimResult
from .targets import claim_results

__all__ = ["collect", "keys", "value", "target_keys"]


def value(result: ClaimResult) -> str:
    if result.not_run is not None:
        return f"missing: {result.not_run}"
    if result.measure is not None:  # a module check: its error as a bucketed fraction of its bound
        return f"passed, {result.measure}" if result.problem is None else f"differs: {result.measure}"
    return "passed" if result.problem is None else f"differs: {result.problem}"


def keys(target: str, results: list[ClaimResult]) -> dict[str, str]:
    """``results`` of ``target`` as profile keys; two cases whose keys are one are an error naming them."""
    out: dict[str, str] = {}
    named: dict[str, str] = {}
    for r in results:
        key = f"claim.{_part(target)}.{_part(r.claim)}.{_part(r.case)}"
        if key in out:
            raise ValueError(f"{target}: the cases {named[key]!r} and {r.claim + ': ' + r.case!r} have one key, {key}")
        out[key], named[key] = value(r), f"{r.claim}: {r.case}"
    return out


def collect(where: Where) -> dict:
    return target_keys(where.claims)


def target_keys(targets: tuple[str, ...], folder: str | os.PathLike[str] | None = None) -> dict:
    """The keys of the claims ``targets`` give, their modules imported with ``folder`` (default:
    the current one) first on ``sys.path``; two targets giving one key are a ValueError naming them."""
    out: dict = {}
    whose: dict[str, str] = {}
    for target in targets:
        for key, value in keys(target, claim_results(target, folder)).items():
            if key in out:
                raise ValueError(f"the targets {whose[key]!r} and {target!r} give one key, {key}: rename one")
            out[key], whose[key] = value, target
    return out
