"""How a catalogued op is judged on a float8 dtype (fp8ref/harness/native/native_ops.py, ``judge``)
and the memory layouts it is judged and checked in (fp8ref/harness/native/layouts.py), on stand-in
ops whose refusals are raised inside torch's folder, as a kernel's are.

Why a test may fail: an op that runs on a later sample called ``refused`` (judged by its first
one), a run on an empty tensor taken for a kernel that runs, ``view``'s error on a transposed
tensor (an error in every dtype) taken for float8's refusal, or a layout that changes a tensor's
values or shape."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from fp8ref.harness.native import native_ops
from fp8ref.harness.native.layouts import LAYOUTS, place, relaid, takes
from fp8ref.reference.formats import E4M3FN
from tests.common.inside_install import inside

# a kernel that refuses 0-d float8 tensors (as torch 2.13's CPU mul refuses a 0-d operand)
_REFUSES_0D = inside(
    "torch",
    "def f(x):\n"
    "    if x.dim() == 0 and x.element_size() == 1:\n"
    "        raise NotImplementedError(\"'stand_in_cpu' not implemented for 'Float8_e4m3fn'\")\n"
    "    return x.clone()\n",
)
# a kernel that refuses non-contiguous float8 tensors
_REFUSES_STRIDES = inside(
    "torch",
    "def f(x):\n"
    "    if not x.is_contiguous() and x.element_size() == 1:\n"
    "        raise NotImplementedError(\"'stand_in_cpu' not implemented for strided 'Float8_e4m3fn'\")\n"
    "    return x.clone()\n",
)


def _op(fn, *shapes, name="clone"):
    """A stand-in OpInfo: ``fn`` on one float32 tensor per shape (``name``: whose kind it takes)."""

    def make(op, device, dtype, requires_grad):
        for shape in shapes:
            yield SimpleNamespace(input=torch.ones(shape, dtype=dtype, device=device), args=(), kwargs={})

    return SimpleNamespace(name=name, variant_test_name="", op=fn, sample_inputs_func=make)


def test_an_op_is_judged_by_every_sample_not_its_first():
    judged = native_ops.judge(_op(_REFUSES_0D, *[()] * 5, (4, 4)), E4M3FN)
    assert judged.word == "partial", judged
    assert judged.ran[0] == "sample 5 (4, 4)" and judged.refused == [f"sample {i} ()" for i in range(5)]
    assert "stand_in_cpu" in judged.why and "runs on sample 5 (4, 4)" in judged.named()


def test_a_run_on_an_empty_tensor_does_not_show_that_an_op_runs():
    assert native_ops.judge(_op(_REFUSES_0D, (), (0, 4)), E4M3FN).word == "refused"
    judged = native_ops.judge(_op(_REFUSES_0D, (0, 4)), E4M3FN)
    assert judged.word == "n/a" and "ran only on empty tensors" in judged.why


def test_a_run_that_writes_only_empty_float8_does_not_show_that_an_op_runs():
    """A factory given the float8 dtype (``eye(0, n)``): no input codes, an empty output."""

    def make(op, device, dtype, requires_grad):
        yield SimpleNamespace(input=torch.ones(2, dtype=dtype), args=(), kwargs={"dtype": dtype})

    def empty(x, dtype):
        return torch.zeros(0, dtype=dtype)

    factory = SimpleNamespace(name="zeros_like", variant_test_name="", op=empty, sample_inputs_func=make)
    assert native_ops.judge(factory, E4M3FN).word == "n/a"


def test_codes_made_for_one_format_are_judged_as_anothers():
    """The formats share each sample's codes (``memo``): a kernel that refuses E8M0 alone is
    refused there and runs on E4M3FN, whichever is judged first."""
    from fp8ref.reference.formats import E8M0FNU

    refuses_e8m0 = inside(
        "torch",
        "def f(x):\n"
        "    if x.dtype == torch.float8_e8m0fnu:\n"
        "        raise NotImplementedError(\"'stand_in_cpu' not implemented for 'Float8_e8m0fnu'\")\n"
        "    return x.clone()\n",
    )
    op = _op(refuses_e8m0, (4, 4))
    made = native_ops._float32_samples(op, "cpu", native_ops.JUDGED)
    for order in ((E4M3FN, E8M0FNU), (E8M0FNU, E4M3FN)):
        memo: dict = {}
        words = {f.name: native_ops.judge(op, f, made=made, memo=memo).word for f in order}
        assert words == {"e4m3fn": "runs", "e8m0fnu": "refused"}, order


def test_a_layout_the_kernel_refuses_makes_the_op_partial_and_is_named():
    judged = native_ops.judge(_op(_REFUSES_STRIDES, (4, 6)), E4M3FN)
    assert judged.word == "partial"
    assert {"sample 0 transposed", "sample 0 sliced", "sample 0 stepped"} <= set(judged.refused)
    assert "sample 0 offset" in judged.ran  # (contiguous at an offset: the stand-in takes it)
    assert (0, "offset") in judged.checked and (0, "transposed") not in judged.checked


def test_every_layout_the_op_runs_in_is_checked():
    judged = native_ops.judge(_op(torch.clone, (2, 3, 4, 5)), E4M3FN)
    assert judged.word == "runs" and judged.refused == []
    assert [layout for _, layout in judged.checked] == list(LAYOUTS)
    labels = [label for label, _ in native_ops.judged_samples("clone", _op(torch.clone, (2, 3, 4, 5)), E4M3FN)]
    assert {label.split(" ", 2)[-1] for label in labels if label != "sample 0"} == set(LAYOUTS[1:])


def test_an_error_in_float32_too_is_no_layout_of_the_op():
    """``view`` of a transposed tensor fails in every dtype: no input of the op, not float8's refusal."""
    judged = native_ops.judge(_op(lambda x: x.view(-1), (4, 6), name="view"), E4M3FN)
    assert judged.word == "runs", judged.named() if judged.refused else judged
    assert not any("transposed" in r for r in judged.refused)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_layout_keeps_shape_and_values_and_changes_the_memory(layout):
    t = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    got = place(t, layout)
    assert got.shape == t.shape and torch.equal(got, t)
    if layout == "contiguous":
        assert got is t
    elif layout == "offset":
        assert got.is_contiguous() and got.storage_offset() == 3
    else:
        assert not got.is_contiguous(), f"{layout}: {got.stride()}"


def test_a_layout_a_tensor_cannot_take_leaves_the_sample_alone():
    assert not takes(torch.ones(5), "transposed") and not takes(torch.ones(2, 3), "channels_last")
    assert not takes(torch.ones(0, 3), "sliced")
    assert relaid(SimpleNamespace(input=torch.ones(5), args=(), kwargs={}), "transposed") is None
    with pytest.raises(ValueError, match="layout: expected one of"):
        takes(torch.ones(2, 2), "diagonal")
