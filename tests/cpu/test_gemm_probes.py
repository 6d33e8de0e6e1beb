"""The GEMM probes and the _scaled_mm argument checks can fail: each is run against a stand-in
``_scaled_mm`` with one known fault, and must report it."""

import pytest
import torch

from fp8ref.harness import probes
from fp8ref.harness.gemm_probes import accumulator_bits, scale_result_rule
from tests.scaled_mm_checks import case, excess, run
from tests.scaled_mm_checks import stand_in as _stand_in


def test_accumulator_probe_measures_a_narrow_accumulator(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(keep_bits=13))
    assert accumulator_bits("cpu", True) == 13
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in())
    assert accumulator_bits("cpu", False) == 23  # float64 sums, capped by the float32 output


@pytest.mark.parametrize("rule", ["divides", "multiplies", "ignored"])
def test_scale_result_probe_tells_the_three_rules_apart(rule, monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(scale_rule=rule))
    assert scale_result_rule("cpu") == rule


@pytest.mark.parametrize(
    "fault,scaling",
    [
        ({"bias_scaled": True}, "tensorwise"),
        ({"row_scale_mean": True}, "rowwise"),
        ({"keep_bits": 8}, "tensorwise"),
    ],
)
def test_the_bound_catches_a_wrong_gemm(fault, scaling, monkeypatch, skip_unless):
    skip_unless(probes.scaled_mm_scaling(scaling), f"{scaling} torch._scaled_mm on cpu")
    c = case(64, 128, 48, scaling, "cpu")
    bias = torch.randn(48, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16) * 8
    assert excess(c, run(c, torch.bfloat16, bias=bias), torch.bfloat16, bias=bias) is None  # the real one
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**fault))
    assert excess(c, run(c, torch.bfloat16, bias=bias), torch.bfloat16, bias=bias) is not None
