"""The GEMM probes and the _scaled_mm argument checks can fail: each is run against a stand-in
``_scaled_mm`` with one known fault, and must report it."""

import pytest
import torch

from fp8ref.gemm_probes import accumulator_bits, scale_result_rule
from tests.scaled_mm_checks import case, excess, run


def _stand_in(keep_bits=None, scale_rule="divides", bias_scaled=False, row_scale_mean=False):
    """A float64 ``_scaled_mm`` with one fault: partial sums rounded to ``keep_bits`` mantissa
    bits, ``scale_result`` applied by ``scale_rule``, the bias scaled with the product, or rowwise A
    scales replaced by their mean."""

    def mm(A, B, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
        a, b = A.double(), B.double()
        sa = scale_a.double().mean() if row_scale_mean else scale_a.double()
        if keep_bits is None:
            out = a @ b
        else:
            out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
            for k in range(a.shape[1]):
                out = out + a[:, k:k + 1] * b[k:k + 1, :]
                m, e = torch.frexp(out)
                out = torch.ldexp(torch.round(m * 2.0 ** (keep_bits + 1)) / 2.0 ** (keep_bits + 1), e)
        out = out * sa * scale_b.double()
        if bias is not None:
            out = out + bias.double() * (sa * scale_b.double() if bias_scaled else 1)
        if scale_result is not None and scale_rule != "ignored":
            out = out / scale_result.double() if scale_rule == "divides" else out * scale_result.double()
        return out.to(out_dtype)

    return mm


def test_accumulator_probe_measures_a_narrow_accumulator(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(keep_bits=13))
    assert accumulator_bits("cpu", True) == 13
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in())
    assert accumulator_bits("cpu", False) == 23  # float64 sums, capped by the float32 output


@pytest.mark.parametrize("rule", ["divides", "multiplies", "ignored"])
def test_scale_result_probe_tells_the_three_rules_apart(rule, monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(scale_rule=rule))
    assert scale_result_rule("cpu") == rule


@pytest.mark.parametrize("fault,scaling", [
    ({"bias_scaled": True}, "tensorwise"),
    ({"row_scale_mean": True}, "rowwise"),
    ({"keep_bits": 8}, "tensorwise"),
])
def test_the_bound_catches_a_wrong_gemm(fault, scaling, monkeypatch):
    c = case(64, 128, 48, scaling, "cpu")
    bias = torch.randn(48, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16) * 8
    assert excess(c, run(c, torch.bfloat16, bias=bias), torch.bfloat16, bias=bias) is None  # the real one
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(**fault))
    assert excess(c, run(c, torch.bfloat16, bias=bias), torch.bfloat16, bias=bias) is not None
