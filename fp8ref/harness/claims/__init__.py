"""A team's own FP8 functions held to what they claim to compute: a small adapter says what a
function claims (a current-scaling cast into a format, with its scale convention; a
TransformerEngine-style delayed-scaling update), and fp8ref runs it on named boundary cases,
every code and seeded random draws, holding each answer to ``fp8ref.reference``.

- ``results``: ``ClaimResult`` (one case: passed, its problem, or a known failure the team named
  with why), ``failures``, ``report`` (the versions in its header), ``read_known`` (the team's file
  of known failures);
- ``cast_claim``: ``CastClaim`` and ``check_cast_claim``;
- ``delayed_claim``: ``DelayedScalingClaim`` and ``check_delayed_scaling_claim``.

Use it in a team's own test: ``assert not failures(check_cast_claim(my_quantize, CastClaim()))``;
docs/claims.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the names' types, for a checker; at run time they load when first asked for)
    from .cast_claim import CastClaim, check_cast_claim
    from .delayed_claim import DelayedScalingClaim, check_delayed_scaling_claim
    from .results import ClaimResult, failures, read_known, report

# (imported when first asked for: ``python -m fp8ref diff`` reads this family's ``meanings``
# without torch)
_WHERE = {
    "CastClaim": "cast_claim",
    "check_cast_claim": "cast_claim",
    "DelayedScalingClaim": "delayed_claim",
    "check_delayed_scaling_claim": "delayed_claim",
    "ClaimResult": "results",
    "failures": "results",
    "read_known": "results",
    "report": "results",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CastClaim",
    "check_cast_claim",
    "DelayedScalingClaim",
    "check_delayed_scaling_claim",
    "ClaimResult",
    "failures",
    "read_known",
    "report",
]
