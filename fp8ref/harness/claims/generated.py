"""Inputs hypothesis generates for a claim, beside the named cases: a search for an input on which
the team's function and the definition part, then made smaller while it still parts. Seeded
(``seed``), nothing stored between runs, no deadline: the same search each run.

hypothesis is optional (fp8ref's ``test`` extra): without it the generated case is reported as
not run, saying so, and never as passed."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from ...reference.validate import integer
from .results import ClaimResult, known_why

__all__ = ["search", "result", "check_examples", "float32_values"]


class _Parted(Exception):
    """The judge found a difference on this example (hypothesis shrinks it)."""


def float32_values(signed: bool) -> Any:
    """A strategy of float32 values over every binade, subnormals to the largest finite, each
    binade as likely (hypothesis's own floats rarely reach a tiny or a huge one), and hypothesis's
    own floats beside (zeros, boundaries); ``signed``: both signs, else none below zero."""
    from hypothesis import strategies as st

    signs = st.sampled_from((1.0, -1.0) if signed else (1.0,))
    # a float32 significand in [1, 2) times a normal binade's power of two is a float32, exactly
    normals = st.builds(
        lambda sign, m, e: sign * m * 2.0**e,
        signs,
        st.floats(1.0, 2.0, exclude_max=True, width=32),
        st.integers(-126, 127),
    )
    subnormals = st.builds(lambda sign, k: sign * k * 2.0**-149, signs, st.integers(1, 2**23 - 1))
    own = st.floats(min_value=None if signed else 0.0, width=32, allow_nan=False, allow_infinity=False)
    return st.one_of(normals, subnormals, own)


def check_examples(examples: object) -> int:
    if integer(examples, "examples") < 0:
        raise ValueError(f"examples: expected how many inputs hypothesis generates (an int >= 0), got {examples!r}")
    return examples  # type: ignore[return-value]  # (an int, checked)


def result(
    claim: str, known: Mapping[str, str] | None, examples: int, seed: int, run: Callable[[], str | None]
) -> ClaimResult:
    """The generated case's result: ``run()``'s problem (None: no example parted), the team's
    known why for it, or why it did not run (no hypothesis here)."""
    case = f"hypothesis-generated inputs ({examples} examples, seed {seed})"
    if importlib.util.find_spec("hypothesis") is None:
        return ClaimResult(
            claim, case, not_run="hypothesis is not installed (pip install hypothesis: fp8ref's test extra)"
        )
    problem = run()
    return ClaimResult(claim, case, problem, known_why(known, claim, case) if problem else None)


def search(
    judge: Callable[[list], str | None], strategy: Any, examples: int, seed: int, row: int = 1
) -> tuple[list, str] | None:
    """``judge`` (a list of values -> None, or what differs) on ``examples`` lists drawn from
    ``strategy``; the first list found to differ, made smaller, and its difference; or None.

    hypothesis generates; fp8ref shrinks, in a bounded number of calls (hypothesis's own
    shrinking of a few dozen floats takes thousands of calls of the team's function): each value
    set to zero, then each row of ``row`` values dropped, each step kept while the list still
    differs."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    parted: list[tuple[list, str]] = []

    @seeded(seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def holds(example: list) -> None:
        problem = judge(example)
        if problem is not None:
            parted.append((example, problem))
            raise _Parted(problem)

    from hypothesis.errors import Flaky

    try:
        holds()
    except (_Parted, Flaky):  # (Flaky: the function answered a replayed input otherwise than before)
        if not parted:
            raise
        return _smaller(judge, *parted[0], row)
    return None


def _smaller(judge: Callable[[list], str | None], values: list, problem: str, row: int) -> tuple[list, str]:
    """``values`` with values zeroed, then rows of ``row`` values dropped, while it still differs."""
    for i in range(len(values)):
        if values[i] != 0.0:
            zeroed = [*values[:i], 0.0, *values[i + 1 :]]
            problem_zeroed = judge(zeroed)
            if problem_zeroed is not None:
                values, problem = zeroed, problem_zeroed
    for start in reversed(range(0, len(values), row)):
        if len(values) > row:
            dropped = values[:start] + values[start + row :]
            problem_dropped = judge(dropped)
            if problem_dropped is not None:
                values, problem = dropped, problem_dropped
    return values, problem
