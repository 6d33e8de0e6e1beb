"""The claims family's profile keys (``claim.*``): a team's claims (``targets``) as keys of the
team's own golden, one per case: ``claim.<target>.<claim>.<case>``, in each part every run of
characters other than letters, digits, ``_``, ``-``, ``+`` and ``:`` made one ``_``, none at
either end. Its value: ``passed``, ``differs: <the
first difference>`` (a known failure too: the golden pins what the code does, the known file why
it is accepted), or ``missing: <why>`` (a case that did not run). Collected only for the targets a
profile is asked for (``Where.claims``): fp8ref's own goldens hold none."""

from __future__ import annotations

import re

from ..stack.probing import Where
from .results import ClaimResult
from .targets import claim_results

__all__ = ["collect", "keys", "value"]


def _part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_+:-]+", "_", text).strip("_")


def value(result: ClaimResult) -> str:
    if result.not_run is not None:
        return f"missing: {result.not_run}"
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
    out: dict = {}
    whose: dict[str, str] = {}
    for target in where.claims:
        for key, value in keys(target, claim_results(target)).items():
            if key in out:
                raise ValueError(f"the targets {whose[key]!r} and {target!r} give one key, {key}: rename one")
            out[key], whose[key] = value, target
    return out
