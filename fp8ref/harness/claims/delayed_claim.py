"""A team's delayed-scaling update held to the rule it claims (``DelayedScalingClaim``):
TransformerEngine's, as ``fp8ref.reference.delayed.DelayedScaling`` defines it. Each step records
this step's amax in a history of ``history_len`` steps, then computes the scale the next step
casts with from the history's max: ``fp8_max / amax / 2^margin`` in float32 (TE's operations),
the previous scale kept where the amax is zero or not finite.

``make()`` returns a fresh state with ``update(amax) -> scale``: the team's object, or an adapter
around its function. Cases, each named in its result: a constant amax, a spike (the scale must
drop at the step that records it), the spike leaving the window, a zero amax and a non-finite
amax (the previous scale kept), a slow rise; then sequences hypothesis generates (any float32
amax from zero to infinity, or NaN, up to twice the history's length and two more: ``examples`` of them; one
that differs is made smaller).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ...reference.delayed import DelayedScaling
from ...reference.validate import integer, one_of, positive_int
from . import generated
from .results import ClaimResult, known_why, titled

__all__ = ["DelayedScalingClaim", "check_delayed_scaling_claim"]


@dataclasses.dataclass(frozen=True)
class DelayedScalingClaim:
    """TransformerEngine's delayed scaling into ``fmt``: the max of the last ``history_len``
    amaxes, ``margin`` binades of headroom."""

    fmt: str = "e4m3fn"
    history_len: int = 16
    margin: int = 0

    def __post_init__(self) -> None:
        one_of(self.fmt, ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"), "fmt")
        positive_int(self.history_len, "history_len")
        integer(self.margin, "margin")

    @property
    def name(self) -> str:
        return f"delayed scaling {self.fmt}, history {self.history_len}, margin {self.margin}"


def cases(claim: DelayedScalingClaim) -> dict[str, list[float]]:
    """The named amax sequences, one update each."""
    h = claim.history_len
    return {
        "a constant amax": [2.0] * 4,
        "a spike: the scale drops at the step that records it": [1.0, 1.0, 1.0, 300.0, 1.0],
        "the spike leaves the window": [300.0] + [1.0] * (h + 1),
        "a zero amax keeps the previous scale": [4.0, 0.0, 0.0],
        "a non-finite amax keeps the previous scale": [4.0, math.inf, math.nan, 4.0],
        "a slow rise": [0.5 * 1.5**i for i in range(6)],
    }


def _run(make: Callable[[], Any], amaxes: list[float], claim: DelayedScalingClaim) -> str | None:
    reference = DelayedScaling(claim.fmt, history_len=claim.history_len, margin=claim.margin, rule="te")
    try:
        state = make()
    except Exception as exc:  # noqa: BLE001 - the team's code's own failure is this case's result
        return f"make() raised {type(exc).__name__}: {exc}"
    for step, amax in enumerate(amaxes, start=1):
        a = torch.tensor(amax, dtype=torch.float32)
        want = reference.update(a)
        try:
            got = state.update(a.clone())
        except Exception as exc:  # noqa: BLE001
            return f"update at step {step} (amax {amax!r}) raised {type(exc).__name__}: {exc}"
        value = float(got) if isinstance(got, (int, float, torch.Tensor)) else None
        if value is None:
            return (
                f"update at step {step}: expected the scale (a float or a one-value tensor), got {type(got).__name__}"
            )
        if not torch.equal(torch.tensor(value, dtype=torch.float32), want.reshape(())):
            seen = ", ".join(repr(a) for a in amaxes[:step])
            return f"after step {step} (amaxes {seen}): got scale {value!r}, want {want.item()!r}"
    return None


def _generated(make: Callable[[], Any], claim: DelayedScalingClaim, examples: int, seed: int) -> str | None:
    """hypothesis's search over amax sequences: the problem (whose words name the sequence), or None."""
    from hypothesis import strategies as st

    amax = st.one_of(generated.float32_values(signed=False), st.sampled_from((math.inf, math.nan)))
    sequences = st.lists(amax, min_size=1, max_size=2 * claim.history_len + 2)
    found = generated.search(lambda amaxes: _run(make, amaxes, claim), sequences, examples, seed)
    return None if found is None else found[1]


def check_delayed_scaling_claim(
    make: Callable[[], Any],
    claim: DelayedScalingClaim,
    *,
    known: Mapping[str, str] | None = None,
    examples: int = 100,
    seed: int = 0,
    label: str | None = None,
) -> list[ClaimResult]:
    """A fresh ``make()`` per case, updated with each of its amaxes; each returned scale held to
    the reference's; then ``examples`` sequences hypothesis generates (0: none), from ``seed``.
    ``known``: the team's known failures (case name -> why); ``label``: the function's name in
    the results (``label: claim``)."""
    if not callable(make):
        raise TypeError(
            f"make: expected a function returning a fresh state with update(amax), got {type(make).__name__}"
        )
    if not isinstance(claim, DelayedScalingClaim):
        raise TypeError(f"claim: expected a DelayedScalingClaim, got {type(claim).__name__}")
    generated.check_examples(examples)
    integer(seed, "seed")
    name = titled(claim.name, label)
    out = []
    for case, amaxes in cases(claim).items():
        problem = _run(make, amaxes, claim)
        out.append(ClaimResult(name, case, problem, known_why(known, name, case) if problem else None))
    if examples:
        out.append(generated.result(name, known, examples, seed, lambda: _generated(make, claim, examples, seed)))
    return out
