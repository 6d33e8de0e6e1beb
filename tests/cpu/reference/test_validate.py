"""fp8ref.reference.validate: the one wording of argument errors, and the named choices (enums)."""

import json

import pytest
import torch

from fp8ref.reference import validate
from fp8ref.reference.delayed import AmaxAlgo, DelayedScaling
from fp8ref.reference.formats import E4M3FN, NanRule
from fp8ref.reference.quantize import Cast, quantize
from fp8ref.reference.scaling import Granularity, Kind, MxMode, mx


@pytest.mark.parametrize(
    "kind,value", [(NanRule, "fnuz"), (Kind, "block"), (MxMode, "rceil"), (Cast, "native"), (AmaxAlgo, "most_recent")]
)
def test_a_choice_is_its_string_everywhere_a_user_sees_it(kind, value):
    member = validate.choice(value, kind, "arg")
    assert member is kind(value) and member == value and hash(member) == hash(value)
    assert str(member) == f"{member}" == value and json.dumps(member) == json.dumps(value)
    assert validate.choice(member, kind, "arg") is member


def test_an_unknown_choice_names_the_argument_and_every_option():
    with pytest.raises(ValueError, match=r"mode: expected one of \('floor', 'rceil', 'ceil', 'even'\), got 'round'"):
        validate.choice("round", MxMode, "mode")


def test_modes_given_as_members_or_strings_give_the_same_result():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    a = quantize(x, E4M3FN, mx(32, MxMode.RCEIL))
    b = quantize(x, "e4m3fn", Granularity("mx", size=32, mx_mode="rceil"))
    assert torch.equal(a.codes, b.codes) and torch.equal(a.scale, b.scale)
    assert a.granularity == b.granularity and a.granularity.kind is Kind.MX
    assert str(a.granularity) == "mx32-rceil"
    assert DelayedScaling(algo="most_recent").algo is AmaxAlgo.MOST_RECENT


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: validate.tensor([1.0], "x"), TypeError, "x: expected a torch.Tensor, got list"),
        (
            lambda: validate.tensor(torch.ones(1, dtype=torch.int32), "x", floating=True),
            TypeError,
            "x: expected a floating-point tensor, got torch.int32",
        ),
        (lambda: validate.tensor(torch.ones(1), "codes", dtypes=(torch.uint8,)), TypeError, "codes: expected dtype in"),
        (lambda: validate.boolean(1, "pow2"), TypeError, "pow2: expected a bool, got int"),
        (lambda: validate.integer(True, "margin"), TypeError, "margin: expected an int, got True"),
        (lambda: validate.positive_int(True, "n"), ValueError, "n: expected a positive int, got True"),
        (lambda: validate.positive_int(0, "n"), ValueError, "n: expected a positive int, got 0"),
        (lambda: validate.positive_number(float("inf"), "eps"), ValueError, "eps: expected a positive number, got inf"),
        (
            lambda: validate.instance("cpu", torch.dtype, "out_dtype", "a torch.dtype"),
            TypeError,
            "out_dtype: expected a torch.dtype, got str",
        ),
        (
            lambda: validate.one_of("x", ("a", "b"), "recipe"),
            ValueError,
            r"recipe: expected one of \('a', 'b'\), got 'x'",
        ),
    ],
)
def test_each_check_names_the_argument_what_was_expected_and_what_came(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_checks_return_what_they_accept():
    t = torch.ones(2)
    assert validate.tensor(t, "x", floating=True) is t
    assert validate.positive_int(3, "n") == 3 and validate.one_of("a", ("a",), "r") == "a"
