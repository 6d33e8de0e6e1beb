"""The tracer on the paths that touch a float8 dtype only at their ends (``trace.dequantized``):
an E8M0 scale's arithmetic, linked to its bytes either way round and held to the definition's
decode; a GEMM of values decoded from float8 codes, held to their exact product; what stops it
(a value changed otherwise, a GEMM it has no bound for) said, not guessed. The faults these catch
in torchao's MX and weight-only workloads: tests/meta/test_mx_gemm_faults.py."""

from __future__ import annotations

import inspect

import pytest
import torch

from fp8ref.harness.trace import Trace, trace

E4M3 = torch.float8_e4m3fn
E8M0: torch.dtype = getattr(torch, "float8_e8m0fnu", torch.uint8)
needs_e8m0 = pytest.mark.skipif(E8M0 == torch.uint8, reason="this torch has no float8_e8m0fnu")

# E8M0 codes of the four blocks' scales: 2^-3, 2^0, 2^2 and the NaN code
_CODES = [124, 127, 129, 255]


def _kinds(got: Trace) -> list[tuple[str, str, str]]:
    return [(r.op, r.kind, r.status) for r in got.records if r.kind in ("e8m0_scale", "dequantized_gemm")]


def _codes_and_activations() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    codes = (torch.randn(4, 32, generator=gen) * 8).to(E4M3)
    return codes, torch.randn(8, 32, generator=gen).to(torch.bfloat16)


def _mx_dequantize_and_gemm(bytes_: torch.Tensor) -> torch.Tensor:
    """torchao's ``to_dtype``/``get_fp_scale`` for E4M3 blocks of one row each, then the GEMM."""
    codes, x = _codes_and_activations()
    scale = bytes_.view(E8M0).view(torch.uint8)
    two = torch.full_like(scale.to(torch.int16), 2.0, dtype=torch.float32)
    s = torch.pow(two, scale.to(torch.int16) - 127)
    s = torch.where(scale != 255, s, float("nan"))
    w = codes.to(torch.bfloat16) * s.to(torch.bfloat16)
    return torch.mm(x[:, :32], w[:3].t())  # (the NaN block left out of the product)


@needs_e8m0
def test_an_mx_dequantize_and_its_gemm_are_recorded_and_checked():
    got = trace(_mx_dequantize_and_gemm, torch.tensor(_CODES, dtype=torch.uint8)[:, None])
    assert _kinds(got) == [
        ("aten.pow.Tensor_Tensor", "e8m0_scale", "ok"),
        ("aten.mm.default", "dequantized_gemm", "ok"),
    ], [r.line() for r in got.records]
    assert not got.violations
    assert all(r.site.rpartition(":")[0] == __file__ for r in got.records), [r.site for r in got.records]


@needs_e8m0
def test_a_reciprocal_scale_made_before_its_bytes_are_e8m0_is_linked_when_they_are():
    """torchao's ``to_mx``: ``exp2(127 - e)`` scales the block, then the bytes become E8M0 (the
    ``exp2`` is recorded then); an ``exp2`` of numbers no E8M0 scale's bytes give is not."""

    def quantize() -> torch.Tensor:
        e = torch.tensor(_CODES, dtype=torch.uint8)[:, None]
        torch.exp2(torch.tensor([[3.0], [5.0]]))  # (no scale's exponent: not recorded)
        reciprocal = torch.exp2(127 - e.to(torch.float32))
        torch.ones(4, 32).mul(reciprocal).to(E4M3)
        return e.view(E8M0)

    got = trace(quantize)
    assert _kinds(got) == [("aten.exp2.default", "e8m0_scale", "ok")], [r.line() for r in got.records]
    (exp2,) = [r for r in got.records if r.kind == "e8m0_scale"]
    lines, first = inspect.getsourcelines(quantize)
    (line,) = [first + i for i, text in enumerate(lines) if "reciprocal = torch.exp2" in text]
    assert exp2.site == f"{__file__}:{line}", exp2.line()


@needs_e8m0
def test_a_power_of_two_one_binade_off_its_e8m0_decode_is_a_violation_naming_the_code():
    """The judge on its own (a torch whose ``exp2`` is wrong: tests/meta/test_mx_gemm_faults.py):
    the NaN code's element is the caller's to write, every other one the decode's, exactly."""
    from fp8ref.harness.trace import dequantized

    codes = torch.tensor(_CODES, dtype=torch.uint8)
    exponent = 127 - codes.double()
    got = torch.exp2(exponent).float() * 2
    got[-1] = 0.0  # (0xFF: whatever the op gives there)
    power = dequantized._Power("aten.exp2.default", "here:1", (), (), exponent, got)
    verdict = dequantized._judge_power(power, codes)
    assert verdict is not None and verdict.status == "violation", verdict
    assert "differs from the E8M0 decode 2^(127-e)" in verdict.problem and verdict.difference is not None
    assert (verdict.difference.count, verdict.difference.total) == (3, 4), verdict.difference
    assert verdict.difference.got == repr(2.0**4) and verdict.difference.want == f"{2.0**3!r} for E8M0 code 0x7c"
    assert dequantized._judge_power(power, codes + 1) is None  # (another scale's bytes: not linked)
    right = dequantized._Power("aten.exp2.default", "here:1", (), (), exponent, got / 2)
    assert dequantized._judge_power(right, codes).status == "ok"


def test_a_weight_only_dequantize_rounded_into_bfloat16_is_held_within_its_roundings():
    """Float8WeightOnly's path: decoded codes times float32 row scales, rounded to bfloat16, then
    the GEMM: its operand is no exact product, and the bound allows that rounding only."""
    codes, x = _codes_and_activations()
    scale = torch.tensor([[0.3], [1.7], [0.01], [5.0]])

    def forward() -> torch.Tensor:
        w = (codes.to(torch.float32) * scale).to(torch.bfloat16)
        return torch.mm(x, w.t())

    got = trace(forward)
    assert _kinds(got) == [("aten.mm.default", "dequantized_gemm", "ok")], [r.line() for r in got.records]


def test_a_biased_and_a_batched_gemm_of_decoded_values_are_held_too():
    codes, x = _codes_and_activations()
    bias = torch.linspace(-1, 1, 4).to(torch.bfloat16)

    def program() -> None:
        w = codes.to(torch.bfloat16) * 0.25
        torch.addmm(bias, x, w.t())
        torch.bmm(x.reshape(2, 4, 32), w.t().expand(2, 32, 4))

    got = trace(program)
    assert _kinds(got) == [
        ("aten.addmm.default", "dequantized_gemm", "ok"),
        ("aten.bmm.default", "dequantized_gemm", "ok"),
    ], [r.line() for r in got.records]


def test_a_value_changed_otherwise_is_no_longer_followed_and_its_gemm_not_recorded():
    codes, x = _codes_and_activations()
    got = trace(lambda: torch.mm(x, (codes.to(torch.bfloat16) + 1).t()))
    assert _kinds(got) == [], [r.line() for r in got.records]
    inplace = trace(lambda: torch.mm(x, codes.to(torch.bfloat16).mul_(3).t()))
    assert _kinds(inplace) == [], [r.line() for r in inplace.records]


def test_a_gemm_without_a_bound_here_is_recorded_unchecked_with_why():
    codes, x = _codes_and_activations()
    bias = torch.zeros(4, dtype=torch.bfloat16)
    got = trace(lambda: torch.addmm(bias, x, codes.to(torch.bfloat16).t(), alpha=2))
    (gemm,) = [r for r in got.records if r.kind == "dequantized_gemm"]
    assert gemm.status == "unchecked" and "alpha or beta" in gemm.reason, gemm.line()


def test_every_output_of_a_recorded_call_is_pinned_by_the_digest():
    """A decode's bfloat16 output (and a GEMM's) is in the digest, as a float8 output is."""
    codes, _ = _codes_and_activations()
    one, other = trace(lambda: codes.to(torch.bfloat16)), trace(lambda: codes.to(torch.bfloat16))
    assert one.fingerprint() == other.fingerprint()
    (decode,) = one.records
    assert f"#{decode.outputs[0].sha256}" in one.digest()[0], one.digest()


def test_an_nvfp4_dequantize_and_its_gemm_are_checked(skip_if_refused):
    """torchao's NVFP4: E2M1 elements unpacked by integer arithmetic (taken as unpacked), UE4M3
    block scales decoded (a float8 decode, held as one) and multiplied in; the GEMM of the result
    is recorded and held to the exact product."""
    from fp8ref.harness.stack.probes import torchao_float8_refusal
    from fp8ref.harness.stack.refusals import import_refusal

    nvfp4 = "torchao.prototype.mx_formats.nvfp4_tensor"
    skip_if_refused(torchao_float8_refusal() or import_refusal(nvfp4, ("NVFP4Tensor",)), "torchao's NVFP4Tensor")
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    gen = torch.Generator().manual_seed(1)
    w = torch.randn(32, 64, generator=gen).to(torch.bfloat16)
    x = torch.randn(16, 64, generator=gen).to(torch.bfloat16)
    got = trace(lambda: torch.nn.functional.linear(x, NVFP4Tensor.to_nvfp4(w).dequantize(torch.bfloat16)))
    assert _kinds(got) == [("aten.mm.default", "dequantized_gemm", "ok")], [r.line() for r in got.records]
    assert any(r.inputs[0].dtype == "float8_e4m3fn" and r.kind == "values" for r in got.records), got.summary()
