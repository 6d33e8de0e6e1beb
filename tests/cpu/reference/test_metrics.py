"""Error measures: values worked out by hand."""

import math

import pytest
import torch

from fp8ref.reference.formats import E4M3FN, E4M3FNUZ
from fp8ref.reference.metrics import calc_diff, max_rel_error, sqnr, ulp_distance


def test_sqnr():
    ref = torch.tensor([3.0, 4.0])  # norm 5
    assert sqnr(ref + torch.tensor([0.3, 0.4]), ref) == pytest.approx(20.0)  # noise norm 0.5
    assert sqnr(ref, ref) == math.inf


def test_calc_diff():
    x = torch.tensor([1.0, 2.0])
    assert calc_diff(x, x) == 0.0
    assert calc_diff(x, -x) == 2.0
    assert calc_diff(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == 1.0


def test_max_rel_error_skips_zeros():
    assert max_rel_error(torch.tensor([1.5, 7.0]), torch.tensor([1.0, 0.0])) == 0.5


def test_ulp_distance_counts_steps_across_zero():
    codes = lambda *c: torch.tensor(c, dtype=torch.uint8)  # noqa: E731
    assert ulp_distance(codes(0x38), codes(0x39), E4M3FN).item() == 1  # 1.0 -> 1.125
    assert ulp_distance(codes(0x01), codes(0x81), E4M3FN).item() == 2  # +min_sub -> -min_sub
    assert ulp_distance(codes(0x00), codes(0x80), E4M3FN).item() == 0  # +0 and -0
    assert ulp_distance(codes(0x7F), codes(0x00), E4M3FN).item() == -1  # NaN
    assert ulp_distance(codes(0x80), codes(0x01), E4M3FNUZ).item() == -1  # FNUZ NaN


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="equal shapes"):
        sqnr(torch.ones(2), torch.ones(3))
    with pytest.raises(TypeError, match="ref: expected a torch.Tensor"):
        calc_diff(torch.ones(2), [1.0, 1.0])
    with pytest.raises(TypeError, match=r"a: expected dtype in \['torch.uint8'\], got torch.float32"):
        ulp_distance(torch.ones(2), torch.ones(2), E4M3FN)
