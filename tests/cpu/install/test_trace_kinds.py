"""What the tracer judges a call as, where the op's name alone would mislead it: a float8 tensor
made from another dtype's bytes, an op of another library named like an aten op, ``aten.to`` (a
cast when it reaches the tracer below autograd), and a destination's old bytes (no input of the
call: a pinned trace must repeat)."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.stack.probing import keys_or_refusal
from fp8ref.harness.trace import trace
from fp8ref.harness.trace.op_checks import check_call

E4M3 = torch.float8_e4m3fn


def test_codes_made_from_another_dtypes_bytes_are_unchecked_not_passed():
    got = trace(lambda: torch.full((4,), 0x7F, dtype=torch.uint8).view(E4M3))
    (view,) = [r for r in got.records if r.op == "aten.view.dtype"]
    assert view.status == "unchecked" and "made outside float8" in view.reason, view.line()
    # float8 read as another float8 dtype is movement, compared bit for bit; read as bytes it leaves
    # float8, with nothing to judge: unchecked, never counted as a pass
    back = trace(lambda: torch.ones(4).to(E4M3).view(torch.float8_e5m2).view(torch.uint8))
    views = [r for r in back.records if r.op == "aten.view.dtype"]
    assert [(r.kind, r.status) for r in views] == [("movement", "ok"), ("unchecked", "unchecked")], [
        r.line() for r in views
    ]


@pytest.fixture
def own_library_mul():
    """``fp8ref_kinds_test::mul``, a library op named like aten's mul, whose kernel is wrong."""
    lib = torch.library.Library("fp8ref_kinds_test", "DEF")
    lib.define("mul(Tensor a, Tensor b) -> Tensor")
    lib.impl("mul", lambda a, b: a.clone(), "CPU")
    yield torch.ops.fp8ref_kinds_test.mul
    lib._destroy()


def test_an_op_of_another_library_is_unchecked_whatever_its_name(own_library_mul):
    a = torch.full((4,), 2.0).to(E4M3)
    got = trace(own_library_mul, a, a)
    (call,) = got.records
    assert call.op == "fp8ref_kinds_test.mul.default" and call.status == "unchecked", call.line()
    assert "not aten's" in call.reason and not got.violations


def test_aten_to_into_float8_is_held_to_the_codec_as_a_cast():
    """1.0625 + 2^-30 rounds to 1.125 once, to 1.0 through float32 (a tie there): torch's CPU cast
    from float64 goes through float32, the rule its profile pins, so both ops pass and say so."""
    x = torch.tensor([1.0625 + 2**-30], dtype=torch.float64)
    for op in (torch.ops.aten.to.dtype, torch.ops.aten._to_copy.default):
        out = op(x, dtype=E4M3) if op is torch.ops.aten._to_copy.default else op(x, E4M3)
        args = (x,) if op is torch.ops.aten._to_copy.default else (x, E4M3)
        kwargs = {"dtype": E4M3} if op is torch.ops.aten._to_copy.default else {}
        verdict = check_call(op, args, kwargs, out)
        assert (verdict.kind, verdict.status) == ("cast", "ok"), (op, verdict)
        assert "through float32" in verdict.observed.values(), (op, verdict.observed)


def test_a_destinations_old_bytes_are_not_pinned_so_the_trace_repeats():
    def program() -> torch.Tensor:
        out = torch.empty(64, dtype=E4M3)  # (whatever memory held)
        return out.copy_(torch.linspace(-3, 3, 64))

    first, again = trace(program), trace(program)
    assert first.pinned() == again.pinned(), (first.pinned(), again.pinned())
    (copy,) = [r for r in first.records if r.op == "aten.copy_.default"]
    assert copy.inputs[0].sha256 == "" and copy.inputs[1].sha256 and copy.outputs[0].sha256, copy.pinned()


def test_a_probe_that_returns_no_keys_is_fp8refs_error_not_a_value():
    with pytest.raises(TypeError, match="expected a dict of keys, got NoneType"):
        keys_or_refusal(["k"], lambda: None)


@pytest.mark.parametrize(("mode", "kind"), [("constant", "written"), ("replicate", "movement")])
def test_aten_pad_of_float8_is_held_to_its_mode(mode, kind):
    """``aten.pad`` (torchao's pad_inner_dim reaches the tracer with it, through its float8
    tensor, on accelerate's FP8 path): a constant pad writes its value, as constant_pad_nd does;
    the other modes move codes. A constant pad that writes another value fails."""
    x = torch.linspace(-2, 2, 12).reshape(1, 3, 4).to(E4M3)
    args = (x, [1, 2], mode, 0.0 if mode == "constant" else None)
    out = torch.nn.functional.pad(x.view(torch.uint8), [1, 2], mode=mode).view(E4M3)  # (codes moved, zeros)
    verdict = check_call(torch.ops.aten.pad.default, args, {}, out)
    assert (verdict.kind, verdict.status) == (kind, "ok"), verdict
    if mode == "constant":
        wrong = torch.nn.functional.pad(x.float(), [1, 2], value=1.0).to(E4M3)  # (ones where zeros belong)
        assert check_call(torch.ops.aten.pad.default, args, {}, wrong).status == "violation"


def test_where_with_a_wider_zero_dim_other_is_written_into_float8():
    """``torch.where(mask, x_f8, torch.tensor(0.0))`` (an MoE's padding mask, say): torch keeps
    the result float8 and casts the 0-d value into it, so it is judged as a write of that value;
    on the uint8 view the float32 other would promote the result (a false violation). A result
    whose masked elements hold another code fails."""
    x = torch.linspace(-2, 2, 12).reshape(3, 4).to(E4M3)
    mask = torch.tensor([True, False, True])[:, None].expand(3, 4)
    other = torch.tensor(1.5)
    got = trace(torch.where, mask, x, other)
    (call,) = [r for r in got.records if r.op == "aten.where.self"]
    assert (call.kind, call.status) == ("written", "ok"), call.line()
    out = torch.where(mask, x, other)
    out.view(torch.uint8)[1] = 0x3C  # (1.5 in E4M3 is 0x3c: the masked row with 1.5's code off by none)
    assert check_call(torch.ops.aten.where.self, (mask, x, other), {}, out).status == "ok"
    out.view(torch.uint8)[1] = 0x3B  # (one code below 1.5)
    verdict = check_call(torch.ops.aten.where.self, (mask, x, other), {}, out)
    assert (verdict.kind, verdict.status) == ("written", "violation"), verdict


def test_index_fill_of_a_number_is_written_not_moved():
    """The CPU refuses float8 ``index_fill``; a GPU runs it. Held to a correct answer built by hand
    (1.0's E4M3 code is 0x38): judged on the uint8 view it would want the byte 0x01."""
    x = torch.linspace(-2, 2, 12).reshape(3, 4).to(E4M3)
    index = torch.tensor([0, 2])
    right = x.clone()
    right.view(torch.uint8)[index] = 0x38
    op = torch.ops.aten.index_fill.int_Scalar
    verdict = check_call(op, (x, 0, index, 1), {}, right)
    assert (verdict.kind, verdict.status) == ("written", "ok"), verdict
    wrong = x.clone()
    wrong.view(torch.uint8)[index] = 0x01
    assert check_call(op, (x, 0, index, 1), {}, wrong).status == "violation"


def test_an_embedding_lookup_of_float8_rows_is_movement():
    """``F.embedding`` on a float8 table (aten.embedding: the catalogue's nn.functional.embedding)
    moves rows of codes: checked, not left unchecked for want of a name."""
    table = torch.linspace(-2, 2, 24).reshape(6, 4).to(E4M3)
    got = trace(torch.nn.functional.embedding, torch.tensor([5, 0, 5]), table)
    (call,) = [r for r in got.records if r.op == "aten.embedding.default"]
    assert (call.kind, call.status) == ("movement", "ok"), call.line()


def test_e8m0_has_no_code_for_zero_or_a_negative_two_answers_are_taken_and_observed():
    """E8M0 has no zero and no sign: the definition gives no code there. NaN or the code of the
    magnitude (zero as the smallest value, 2^-127) are taken, which one came observed; any other
    code is a violation (an all-zero MX block whose scale came out 2^-60 would hide otherwise)."""

    e8m0 = getattr(torch, "float8_e8m0fnu", None)
    if e8m0 is None:
        pytest.skip(f"torch {torch.__version__} has no float8_e8m0fnu")
    x = torch.tensor([-4.0, -0.5, 0.0, -0.0])
    cast = torch.ops.aten._to_copy.default

    def codes(*c: int) -> torch.Tensor:
        return torch.tensor(c, dtype=torch.uint8).view(e8m0)

    magnitude = check_call(cast, (x,), {"dtype": e8m0}, codes(0x81, 0x7E, 0x00, 0x00))
    assert magnitude.status == "ok" and "magnitude" in magnitude.observed.values(), magnitude
    nan = check_call(cast, (x,), {"dtype": e8m0}, codes(0xFF, 0xFF, 0xFF, 0xFF))
    assert nan.status == "ok" and "nan" in nan.observed.values(), nan
    wrong = check_call(cast, (x,), {"dtype": e8m0}, codes(0x81, 0x7E, 0x42, 0x00))
    assert wrong.status == "violation" and wrong.difference is not None and wrong.difference.index == (2,), wrong
