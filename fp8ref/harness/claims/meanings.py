"""What the claims family's keys mean (``profile_keys.py``): a team's own FP8 function held to
what it claims, one key per case. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("claim",)

MEANINGS: tuple[KeyMeaning, ...] = (
    KeyMeaning(
        "claim.**",
        "claims",
        "a case of the team's own FP8 function ({1}) held to what it claims (fp8ref.harness.claims): passed, "
        "or the first difference from the definition",
        "the team's kernel or scaling code now computes other codes or scales on this case than before: the "
        "numbers its training casts with changed",
        "numerics",
    ),
)
