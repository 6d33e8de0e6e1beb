"""The parity rule: FP8's tail loss against bf16 runs, judged with the run-to-run noise measured
from them: whether FP8 differs measurably, and whether it is within its budget
(docs/finetune-parity.md)."""

from __future__ import annotations

import math
from typing import Any

from .intervals import prediction_t, sd_interval
from .presets import CONFIDENCE, PARITY_Z

__all__ = ["tail_gap", "tail_loss", "parity"]


def tail_gap(baseline: list, fp8: list, fraction: float = 0.1) -> tuple[int, float, float, float]:
    """``(k, tail_baseline, tail_fp8, gap)``: the mean loss of each run's last ``k`` steps
    (``fraction`` of them, at least one; fp8_parity.py's measure) and ``(fp8 - baseline) / baseline``."""
    if len(baseline) != len(fp8) or not baseline:
        raise ValueError(
            f"baseline, fp8: expected two non-empty loss lists of one length, got {len(baseline)} and {len(fp8)}"
        )
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction: expected 0 < fraction <= 1, got {fraction}")
    k = max(1, int(len(baseline) * fraction))
    tails = []
    for losses in (baseline, fp8):
        tail = losses[-k:]
        if any(x is None or not math.isfinite(x) for x in tail):
            return k, math.nan, math.nan, math.nan  # a diverged run has no gap to report
        tails.append(sum(tail) / k)
    return k, tails[0], tails[1], (tails[1] - tails[0]) / tails[0]


def tail_loss(losses: list) -> float:
    """The mean loss of the last tenth of the steps (NaN when the run diverged there)."""
    return tail_gap(losses, losses)[1]


def parity(
    bf16_tails: list[float],
    fp8_tail: float,
    budget: float,
    z: float = PARITY_Z,
    confidence: float = CONFIDENCE,
    budget_source: str | None = None,
) -> dict:
    """FP8's tail loss against the bf16 runs, with the run-to-run noise measured from them: two
    separate statements, whether FP8 differs *measurably* from bf16 and whether it is *within
    its budget*.

    ``noise`` is the relative sample standard deviation of the bf16 tail losses (runs that differ
    only by one-ulp nudges of the initial weights), scaled by sqrt(1 + 1/n) because the gap also
    carries the error of the n-run bf16 mean; ``z_score`` is the gap in those units.

    Measurably different (``different``): ``|z_score|`` beyond ``t_critical``, the range one more
    bf16 run lands in with probability ``confidence`` (Student t with n - 1 degrees of freedom, the
    uncertainty of a noise estimated from n runs included). ``noise_interval`` is the
    ``confidence`` interval on the noise itself (chi-square, n - 1 degrees of freedom).

    Within the budget (``within``, the verdict ``finetune --check`` exits on):
    ``|fp8 / mean(bf16) - 1| <= budget + z * noise``: FP8 may cost ``budget``, and what the runs'
    divergence can explain at ``z`` standard deviations is not counted against it. With one bf16
    run there is no noise estimate, ``different`` is None and the bound is the budget alone.
    ``budget_fraction`` is ``|gap| / budget``; ``budget_source`` says where the budget comes from."""
    values = [x for x in bf16_tails if x is not None and math.isfinite(x)]
    out: dict[str, Any] = {
        "baseline": None,
        "gap": math.nan,
        "noise": None,
        "z_score": None,
        "budget": budget,
        "bound": None,
        "within": False,
        "bf16_runs": len(bf16_tails),
        "z": z,
        "confidence": confidence,
        "noise_interval": None,
        "t_critical": None,
        "different": None,
        "budget_fraction": None,
        "budget_source": budget_source,
    }
    if len(values) != len(bf16_tails) or not values or fp8_tail is None or not math.isfinite(fp8_tail):
        return out  # a diverged run: no gap, never within
    n = len(values)
    mean = sum(values) / n
    gap = fp8_tail / mean - 1
    out.update(baseline=mean, gap=gap, bf16_runs=n, budget_fraction=abs(gap) / budget if budget > 0 else None)
    noise = None
    if n > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
        inflate = math.sqrt(1 + 1 / n) / mean
        noise = sd * inflate
        low, high = sd_interval(sd, n, confidence)
        t = prediction_t(n, confidence)
        out.update(
            noise=noise,
            noise_interval=[low * inflate, high * inflate],
            t_critical=t,
            z_score=gap / noise if noise else None,
            # (runs that agree to the last bit leave no noise: any gap then differs)
            different=abs(gap) > t * noise,
        )
    bound = budget + (z * noise if noise is not None else 0.0)
    out.update(bound=bound, within=abs(gap) <= bound)
    return out
