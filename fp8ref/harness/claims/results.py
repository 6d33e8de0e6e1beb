"""One case's result, the failures among them, a report with the install's versions in its header,
and the team's own file of known failures (case name -> why)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ClaimResult", "failures", "report", "read_known", "known_why", "titled"]


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """``case``: the named case; ``problem``: None when the function gave what the definition
    gives, else the first difference in words; ``known``: the team's why, when it named this case
    as a known failure (the result then does not fail, and says so); ``not_run``: why the case
    did not run (hypothesis not installed): neither passed nor failed. ``measure`` and ``margin``:
    a module check's (``fp8ref.harness.twin``) largest error as a bucketed fraction of its bound
    (what a golden pins) and unbucketed (printed beside a pass)."""

    claim: str
    case: str
    problem: str | None = None
    known: str | None = None
    not_run: str | None = None
    # a module check's (fp8ref.harness.twin): the largest error as a bucketed fraction of its
    # bound, the value a golden pins; and the same unbucketed, printed beside a pass
    measure: str | None = None
    margin: str | None = None

    @property
    def failed(self) -> bool:
        return self.problem is not None and self.known is None

    def line(self) -> str:
        if self.not_run is not None:
            return f"not run {self.claim}: {self.case}: {self.not_run}"
        if self.problem is None:
            return f"passed  {self.claim}: {self.case}" + (f" ({self.margin})" if self.margin else "")
        if self.known is not None:
            return f"known   {self.claim}: {self.case}: {self.problem} (known: {self.known})"
        return f"FAILED  {self.claim}: {self.case}: {self.problem}"


def failures(results: list[ClaimResult]) -> list[ClaimResult]:
    """The results that fail: a problem the team did not name as known."""
    return [r for r in results if r.failed]


def report(results: list[ClaimResult]) -> str:
    """The results, one line each, under a header naming the install (torch, torchao, ...) and the
    counts."""
    from ..stack.install import versions

    v = versions()
    head = ", ".join(f"{k} {v[k]}" for k in ("torch", "torchao", "ml_dtypes") if v.get(k))
    bad = len(failures(results))
    known = sum(r.problem is not None and r.known is not None for r in results)
    not_run = sum(r.not_run is not None for r in results)
    lines = [
        f"fp8ref claims on {head}: {len(results)} cases, {bad} failed, {known} known failures"
        + (f", {not_run} not run" if not_run else "")
    ]
    return "\n".join(lines + [r.line() for r in results])


def read_known(path: str | Path) -> dict[str, str]:
    """A team's known failures: a JSON object of case name -> why (a non-empty string)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"known: cannot read {path} as JSON ({exc})") from exc
    bad = [k for k, v in data.items() if not (isinstance(v, str) and v.strip())] if isinstance(data, dict) else None
    if bad is None or bad:
        raise ValueError(f"known: {path}: expected a JSON object of case name -> why (a non-empty string); bad: {bad}")
    return data


def known_why(known: Mapping[str, str] | None, claim: str, case: str) -> str | None:
    """The team's why for ``case`` of ``claim``: its known file names it as the report prints it
    (``claim: case``) or by the case alone (then for every claim of the call)."""
    if known is None:
        return None
    return known.get(f"{claim}: {case}", known.get(case))


def titled(claim: str, label: str | None) -> str:
    """A claim's name in its results: ``label: claim`` where the team labels the function (two
    functions held to one claim, told apart in the report and the golden's keys)."""
    if label is None:
        return claim
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"label: expected a non-empty name for the function, got {label!r}")
    return f"{label}: {claim}"
