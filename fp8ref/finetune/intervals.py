"""How sure the parity verdict can be with n bf16 runs: Student t and chi-square quantiles for an
integer number of degrees of freedom, the interval on a standard deviation estimated from n runs,
and the range one more run lands in.

The distribution functions are the closed forms for integer degrees of freedom in Abramowitz &
Stegun, *Handbook of Mathematical Functions* (1964): 26.7.3-26.7.4 (Student t, ``P(|T| <= t)``)
and 26.4.4-26.4.5 (chi-square, the upper tail); quantiles by bisection on them. Standard library
only, exact to float64 rounding for the few degrees of freedom a comparison has.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["t_quantile", "chi2_quantile", "sd_interval", "prediction_t"]


def _dof(df: int) -> int:
    if not isinstance(df, int) or isinstance(df, bool) or df < 1:
        raise ValueError(f"df: expected an int >= 1 (degrees of freedom), got {df!r}")
    return df


def _probability(p: float) -> float:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 < p < 1:
        raise ValueError(f"p: expected a probability strictly between 0 and 1, got {p!r}")
    return float(p)


def _t_central(t: float, df: int) -> float:
    """``P(|T| <= t)`` for Student's t with ``df`` degrees of freedom, t >= 0 (A&S 26.7.3-26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 0:  # sin(theta) (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ... up to cos^(df-2))
        term = total = 1.0
        for k in range(1, df // 2):
            term *= (2 * k - 1) / (2 * k) * c * c
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = c  # (2/pi)(theta + sin(theta)(cos + 2/3 cos^3 + ... up to cos^(df-2)))
    for k in range(1, (df - 1) // 2):
        term *= (2 * k) / (2 * k + 1) * c * c
        total += term
    return 2 / math.pi * (theta + s * total)


def _chi2_upper(x: float, df: int) -> float:
    """``P(X > x)`` for chi-square with ``df`` degrees of freedom, x >= 0 (A&S 26.4.4-26.4.5)."""
    if x <= 0:
        return 1.0
    if df % 2 == 0:  # exp(-x/2) sum_{k < df/2} (x/2)^k / k!
        term = total = 1.0
        for k in range(1, df // 2):
            term *= x / 2 / k
            total += term
        return math.exp(-x / 2) * total
    chi = math.sqrt(x)  # 2 Q(chi) + 2 phi(chi) sum_{r=1}^{(df-1)/2} chi^(2r-1) / (1*3*...*(2r-1))
    density = math.exp(-x / 2) / math.sqrt(2 * math.pi)
    term, total = chi, 0.0
    for r in range(1, (df - 1) // 2 + 1):
        if r > 1:
            term *= x / (2 * r - 1)
        total += term
    return math.erfc(chi / math.sqrt(2)) + 2 * density * total


def _bisect(below: float, increasing: Callable[[float], float], target: float) -> float:
    """The x >= 0 where ``increasing(x)`` reaches ``target``, bracketed by doubling from ``below``."""
    lo, hi = 0.0, below
    while increasing(hi) < target:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if increasing(mid) < target else (lo, mid)
    return (lo + hi) / 2


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom."""
    p, df = _probability(p), _dof(df)
    if p == 0.5:
        return 0.0
    magnitude = _bisect(1.0, lambda t: _t_central(t, df), abs(2 * p - 1))
    return magnitude if p > 0.5 else -magnitude


def chi2_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of the chi-square distribution with ``df`` degrees of freedom."""
    p, df = _probability(p), _dof(df)
    return _bisect(float(df), lambda x: 1.0 - _chi2_upper(x, df), p)


def sd_interval(sd: float, n: int, confidence: float) -> tuple[float, float]:
    """The two-sided ``confidence`` interval on a normal population's standard deviation from the
    sample standard deviation ``sd`` of ``n`` >= 2 values: ``sd * sqrt((n-1) / chi2(q, n-1))`` at
    q = (1 + confidence) / 2 and (1 - confidence) / 2 (NIST/SEMATECH e-Handbook of Statistical
    Methods, 1.3.5.8). With 3 runs and 95% it spans 0.52 to 6.3 times ``sd``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n: expected an int >= 2 (a spread needs two values), got {n!r}")
    alpha = 1 - _probability(confidence)
    df = n - 1
    return (
        sd * math.sqrt(df / chi2_quantile(1 - alpha / 2, df)),
        sd * math.sqrt(df / chi2_quantile(alpha / 2, df)),
    )


def prediction_t(n: int, confidence: float) -> float:
    """How many sample standard deviations (each times sqrt(1 + 1/n)) from the mean of ``n``
    runs one more run from the same distribution lands, at most, with probability
    ``confidence``: ``t((1 + confidence) / 2, n - 1)``, the prediction interval for one new
    observation (Hahn & Meeker, *Statistical Intervals*, 1991, ch. 4). It carries the uncertainty
    of a spread estimated from few runs: 4.30 for 3 runs at 95%, against 1.96 for a known one."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n: expected an int >= 2 (a spread needs two values), got {n!r}")
    return t_quantile((1 + _probability(confidence)) / 2, n - 1)
