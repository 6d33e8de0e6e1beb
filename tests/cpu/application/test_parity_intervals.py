"""The quantiles the parity verdict states its confidence with (``fp8ref.finetune.intervals``),
against published tables: NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2 (critical
values of Student's t) and 1.3.6.7.4 (critical values of the chi-square distribution). Each
table value is compared to the digits it is printed with."""

import math
from typing import Any

import pytest

from fp8ref.finetune.intervals import chi2_quantile, prediction_t, sd_interval, t_quantile


def _printed(value: str) -> Any:
    """pytest.approx of a table entry, to half a unit of its last printed digit."""
    digits = len(value.split(".")[1]) if "." in value else 0
    return pytest.approx(float(value), abs=0.5 * 10**-digits)


# (degrees of freedom, upper-tail probability, t) from the handbook's table 1.3.6.7.2
T_TABLE = [
    (1, 0.025, "12.706"),
    (1, 0.05, "6.314"),
    (2, 0.025, "4.303"),
    (2, 0.005, "9.925"),
    (3, 0.025, "3.182"),
    (4, 0.025, "2.776"),
    (5, 0.025, "2.571"),
    (10, 0.025, "2.228"),
    (30, 0.025, "2.042"),
    (100, 0.025, "1.984"),
]

# (degrees of freedom, lower-tail probability, chi-square) from the handbook's table 1.3.6.7.4
CHI2_TABLE = [
    (1, 0.025, "0.001"),
    (1, 0.975, "5.024"),
    (2, 0.025, "0.051"),
    (2, 0.975, "7.378"),
    (3, 0.025, "0.216"),
    (3, 0.975, "9.348"),
    (4, 0.975, "11.143"),
    (5, 0.025, "0.831"),
    (5, 0.975, "12.833"),
    (10, 0.025, "3.247"),
    (10, 0.975, "20.483"),
    (30, 0.975, "46.979"),
]


@pytest.mark.parametrize("df,upper,expected", T_TABLE)
def test_t_quantiles_match_the_table(df, upper, expected):
    got = t_quantile(1 - upper, df)
    assert got == _printed(expected), f"t({1 - upper}, df={df}): expected {expected}, got {got}"
    assert t_quantile(upper, df) == pytest.approx(-got), "Student's t is symmetric"


@pytest.mark.parametrize("df,lower,expected", CHI2_TABLE)
def test_chi2_quantiles_match_the_table(df, lower, expected):
    got = chi2_quantile(lower, df)
    assert got == _printed(expected), f"chi2({lower}, df={df}): expected {expected}, got {got}"


def test_the_sd_interval_and_prediction_range_of_three_runs():
    """Three runs (2 degrees of freedom) at 95%: the sd lies within sd x sqrt(2 / 7.378) and
    sd x sqrt(2 / 0.0506), and one more run within +-4.303 sd x sqrt(1 + 1/3) of their mean."""
    assert sd_interval(1.0, 3, 0.95) == pytest.approx((math.sqrt(2 / 7.378), math.sqrt(2 / 0.0506)), rel=2e-3)
    assert prediction_t(3, 0.95) == _printed("4.303")
    # more runs, a narrower interval: 11 runs (10 degrees of freedom)
    assert sd_interval(1.0, 11, 0.95) == pytest.approx((math.sqrt(10 / 20.483), math.sqrt(10 / 3.247)), rel=1e-3)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: t_quantile(1.0, 2), "p"),
        (lambda: t_quantile(0.9, 0), "df"),
        (lambda: chi2_quantile(0.0, 2), "p"),
        (lambda: chi2_quantile(0.5, 1.5), "df"),  # type: ignore[arg-type]
        (lambda: sd_interval(1.0, 1, 0.95), "n"),
        (lambda: prediction_t(3, 95), "p"),
    ],
)
def test_bad_arguments_raise_naming_them(call, match):
    with pytest.raises(ValueError, match=f"^{match}:"):
        call()
