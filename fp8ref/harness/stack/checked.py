"""What a check that first asks whether the install runs its subject returns."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Checked"]


class Checked(NamedTuple):
    """``refusal``: the install declined the check's subject (its own words), so nothing was
    compared; ``problem``: None when the answer conforms, else what differs. At most one is set."""

    refusal: str | None
    problem: str | None

    @classmethod
    def refused(cls, refusal: str) -> Checked:
        return cls(refusal, None)

    @classmethod
    def compared(cls, problem: str | None) -> Checked:
        return cls(None, problem)
