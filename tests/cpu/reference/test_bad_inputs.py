"""What a user may send the public functions by mistake, and what they get back: a clear
``TypeError``/``ValueError`` naming the argument and what was expected, or, where one is well
defined, a documented result (an empty tensor quantizes to an empty tensor; a 0-d tensor is one
value; a non-contiguous tensor is read as its values). A corrupted golden profile is in
tests/cpu/tools/test_profile.py, the command line's errors in tests/cpu/tools/test_cli_exit_codes.py."""

from typing import Any

import pytest
import torch

from fp8ref.reference import codec, delayed, emulate, metrics, nvfp4, recipes, scaling
from fp8ref.reference import quantize as q
from fp8ref.reference.formats import E4M3FN, get_format
from fp8ref.reference.scaling import axiswise, block, mx, tensorwise, tile


def _wrong(value: object) -> Any:
    """A value of the wrong type, passed on purpose (typed Any so the type checker lets it through)."""
    return value


ERRORS = {
    # wrong dtypes and kinds
    "encode int32": (lambda: codec.encode(torch.ones(3, dtype=torch.int32), "e4m3fn"), TypeError, r"x: expected dtype"),
    "encode float64": (
        lambda: codec.encode(torch.ones(3, dtype=torch.float64), "e4m3fn"),
        TypeError,
        r"x: expected dtype",
    ),
    "encode a list": (lambda: codec.encode(_wrong([1.0]), "e4m3fn"), TypeError, r"x: expected a torch.Tensor"),
    "decode float32": (lambda: codec.decode(torch.ones(3), "e4m3fn"), TypeError, r"codes: expected dtype"),
    "quantize int64": (
        lambda: q.quantize(torch.ones(3, dtype=torch.int64), "e4m3fn"),
        TypeError,
        r"x: expected a floating-point tensor",
    ),
    "ulp_distance of floats": (
        lambda: metrics.ulp_distance(torch.ones(3), torch.ones(3), "e4m3fn"),
        TypeError,
        r"a: expected dtype",
    ),
    "dequantize a tensor": (lambda: q.dequantize(_wrong(torch.ones(3))), TypeError, r"q: expected an Quantized"),
    "granularity as a string": (
        lambda: q.quantize(torch.ones(2, 3), "e4m3fn", _wrong("rowwise")),
        TypeError,
        r"granularity: expected a Granularity",
    ),
    "Fp8Linear from a Conv1d": (
        lambda: emulate.Fp8Linear.from_linear(_wrong(torch.nn.Conv1d(2, 2, 1))),
        TypeError,
        r"mod: expected an nn.Linear",
    ),
    "delayed amax as a list": (lambda: delayed.DelayedScaling().update(_wrong([1.0])), TypeError, r"amax: expected"),
    # unknown names
    "format name": (lambda: codec.encode(torch.ones(3), "e4m3"), ValueError, r"fmt: expected one of"),
    "format as an int": (lambda: get_format(_wrong(8)), TypeError, r"fmt: expected a FloatFormat or a format name"),
    "format None": (lambda: get_format(_wrong(None)), TypeError, r"fmt: expected"),
    "recipe name": (lambda: recipes.get_recipe("fp8"), ValueError, r"recipe: expected one of"),
    "recipe name in fp8_linear": (
        lambda: emulate.fp8_linear(torch.ones(2, 16), torch.ones(4, 16), recipe="x"),
        ValueError,
        r"recipe: expected one of",
    ),
    "MX mode": (lambda: mx(32, "round"), ValueError, r"mx_mode: expected one of"),
    "rounding mode": (
        lambda: codec.round_to_format(torch.ones(2), "e4m3fn", rounding="up"),
        ValueError,
        r"rounding: expected one of",
    ),
    "delayed rule": (lambda: delayed.DelayedScaling(rule="deepseek"), ValueError, r"rule: expected one of"),
    "delayed algo": (lambda: delayed.DelayedScaling(algo="mean"), ValueError, r"algo: expected one of"),
    # block sizes and shapes
    "tile size 0": (lambda: tile(0), ValueError, r"size: expected a positive int"),
    "block size -1": (lambda: block(-1), ValueError, r"size: expected a positive int"),
    "MX block size 0": (lambda: mx(0), ValueError, r"size: expected a positive int"),
    "tile not dividing": (
        lambda: q.quantize(torch.ones(2, 100), "e4m3fn", tile(128)),
        ValueError,
        r"multiple of 128, got shape \(2, 100\)",
    ),
    "block not dividing": (
        lambda: q.quantize(torch.ones(100, 128), "e4m3fn", block(128)),
        ValueError,
        r"multiples of 128",
    ),
    "MX not dividing": (lambda: q.quantize(torch.ones(2, 40), "e4m3fn", mx(32)), ValueError, r"multiple of 32"),
    "NVFP4 not dividing": (lambda: nvfp4.quantize(torch.ones(3, 24)), ValueError, r"multiple of 16"),
    "NVFP4 of a 0-d tensor": (lambda: nvfp4.quantize(torch.tensor(1.0)), ValueError, r"multiple of 16"),
    "axiswise dim out of range": (
        lambda: q.quantize(torch.ones(2, 3), "e4m3fn", axiswise(5)),
        ValueError,
        r"dim: 5 is out of range",
    ),
    "axiswise on a 0-d tensor": (
        lambda: q.quantize(torch.tensor(3.0), "e4m3fn", axiswise(-1)),
        ValueError,
        r"dim: -1 is out of range",
    ),
    "linear shapes": (
        lambda: emulate.fp8_linear(torch.ones(2, 16), torch.ones(4, 8)),
        ValueError,
        r"w: expected shape \(out, 16\)",
    ),
    "scale of the wrong shape": (
        lambda: q.quantize_with_scale(torch.ones(3, 4), torch.ones(5), "e4m3fn", axiswise(-1)),
        ValueError,
        r"scale: expected shape \(3, 1\)",
    ),
    "metrics of other shapes": (lambda: metrics.sqnr(torch.ones(3), torch.ones(4)), ValueError, r"equal shapes"),
    "metrics of nothing": (lambda: metrics.sqnr(torch.ones(0), torch.ones(0)), ValueError, r"non-empty"),
    "pack an odd count": (lambda: codec.pack_fp4(torch.zeros(3, dtype=torch.uint8)), ValueError, r"even last dim"),
    "history length 0": (
        lambda: delayed.DelayedScaling(history_len=0),
        ValueError,
        r"history_len: expected a positive",
    ),
    # amax and scales
    "negative amax": (
        lambda: scaling.amax_to_scale(torch.tensor(-1.0), "e4m3fn"),
        ValueError,
        r"amax: expected non-negative",
    ),
    "eps 0": (
        lambda: scaling.amax_to_scale(torch.tensor(1.0), "e4m3fn", eps=0),
        ValueError,
        r"eps: expected a positive",
    ),
    "zero static scale": (
        lambda: q.quantize_with_scale(torch.ones(3), 0.0, "e4m3fn"),
        ValueError,
        r"scale: expected a positive finite",
    ),
    "negative static scale": (
        lambda: q.quantize_with_scale(torch.ones(3), -2.0, "e4m3fn"),
        ValueError,
        r"scale: expected a positive finite",
    ),
    "NaN scale tensor": (
        lambda: q.quantize_with_scale(torch.ones(2, 3), torch.tensor([[1.0], [float("nan")]]), "e4m3fn", axiswise(-1)),
        ValueError,
        r"1 that are not",
    ),
    "inf scale": (
        lambda: q.quantize_with_scale(torch.ones(3), float("inf"), "e4m3fn"),
        ValueError,
        r"scale: expected a positive finite",
    ),
    "zero NVFP4 tensor scale": (
        lambda: nvfp4.quantize(torch.ones(1, 16), 0.0),
        ValueError,
        r"tensor_scale: expected a positive finite",
    ),
    "NaN into FP4": (lambda: codec.encode(torch.tensor([float("nan")]), "e2m1fn"), ValueError, r"has no NaN"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_input_gets_a_clear_error(case):
    call, kind, message = ERRORS[case]
    with pytest.raises(kind, match=message):
        call()


# --- documented results ------------------------------------------------------------------------
@pytest.mark.parametrize("g", [tensorwise(), axiswise(-1), mx(32), tile(32)], ids=str)
def test_an_empty_tensor_quantizes_to_an_empty_tensor(g):
    x = torch.empty(0, 32)
    d = q.quantize(x, E4M3FN, g)
    assert d.codes.shape == (0, 32) and d.dequantize().shape == (0, 32)
    assert codec.encode(torch.empty(0), "e4m3fn").shape == (0,)
    assert codec.decode(torch.empty(0, dtype=torch.uint8), "e4m3fn").shape == (0,)
    assert nvfp4.quantize(torch.empty(0, 16)).dequantize().shape == (0, 16)
    assert codec.pack_fp4(torch.empty(0, dtype=torch.uint8)).shape == (0,)


def test_a_0d_tensor_is_one_value():
    x = torch.tensor(3.0)
    assert int(codec.encode(x, "e4m3fn")) == int(codec.encode(x.reshape(1), "e4m3fn")[0])
    d = q.quantize(x, E4M3FN)
    assert d.codes.shape == () and float(d.dequantize()) == 3.0


def test_a_non_contiguous_tensor_is_read_as_its_values():
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    t = x.t()
    assert not t.is_contiguous()
    assert torch.equal(codec.encode(t, "e4m3fn"), codec.encode(t.contiguous(), "e4m3fn"))
    assert torch.equal(q.quantize(t, E4M3FN, mx(32)).codes, q.quantize(t.contiguous(), E4M3FN, mx(32)).codes)
    assert torch.equal(codec.decode(codec.encode(t, "e4m3fn"), "e4m3fn"), codec.round_to_format(t, "e4m3fn"))


def test_nan_and_inf_amax_give_the_documented_scales():
    """Current scaling: amax NaN -> NaN scale, inf -> 0, 0 -> fp8_max / 1e-12 (scaling's docstring);
    delayed scaling keeps the previous scale for each (TE's rule)."""
    s = scaling.amax_to_scale(torch.tensor([float("nan"), float("inf"), 0.0]), "e4m3fn")
    assert torch.isnan(s[0]) and s[1] == 0 and s[2] == torch.tensor(448 / 1e-12, dtype=torch.float64).float()
    ds = delayed.DelayedScaling(history_len=1, algo="most_recent")
    ds.update(2.0)
    before = ds.scale.clone()
    for bad in (float("nan"), float("inf"), 0.0):
        assert torch.equal(ds.update(bad), before)
