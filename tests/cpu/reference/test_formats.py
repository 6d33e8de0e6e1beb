"""Format constants: derived from the bit layout, held against the specs, torch.finfo and
ml_dtypes.finfo. A disagreement is either a failure or a strict xfail naming who disagrees and
where it was seen, so it stays visible (and a fix upstream turns the xfail into a failure that
asks for the entry to be removed)."""

import math

import pytest
import torch

from fp8ref.harness.stack import probes
from fp8ref.reference.formats import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0FNU, FloatFormat, get_format, select
from tests.common.params import TORCH_FORMATS

# Numbers stated by the specifications themselves (OCP OFP8 rev 1.0 tables for E4M3/E5M2; the
# FNUZ definitions as in LLVM APFloat / ml_dtypes docs; OCP MX v1.0 for E8M0), typed in from the
# documents, not from this code: (bias, max, min normal, min subnormal, NaN codes, has inf).
SPEC = {
    "e4m3fn": (7, 448.0, 2.0**-6, 2.0**-9, (0x7F, 0xFF), False),
    "e5m2": (15, 57344.0, 2.0**-14, 2.0**-16, (0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF), True),
    "e4m3fnuz": (8, 240.0, 2.0**-7, 2.0**-10, (0x80,), False),
    "e5m2fnuz": (16, 57344.0, 2.0**-15, 2.0**-17, (0x80,), False),
    "e8m0fnu": (127, 2.0**127, 2.0**-127, 2.0**-127, (0xFF,), False),
}


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_derived_constants_match_the_spec(fmt: FloatFormat) -> None:
    bias, fmax, min_normal, min_sub, nan_codes, has_inf = SPEC[fmt.name]
    got = (fmt.bias, fmt.max, fmt.min_normal, fmt.min_subnormal, fmt.nan_codes, fmt.has_inf)
    assert got == SPEC[fmt.name], f"{fmt.name}: derived {got}, spec {SPEC[fmt.name]}"


def test_e4m3fn_top_binade_is_finite_except_nan():
    # OCP OFP8: E4M3 reclaims S.1111.000-110 as finite values; only S.1111.111 is NaN.
    assert [E4M3FN.value_of(c) for c in range(0x78, 0x7F)] == [256, 288, 320, 352, 384, 416, 448]
    assert math.isnan(E4M3FN.value_of(0x7F)) and math.isnan(E4M3FN.value_of(0xFF))


def test_e5m2_specials_follow_ieee():
    assert E5M2.value_of(0x7C) == math.inf and E5M2.value_of(0xFC) == -math.inf
    assert E5M2.value_of(0x80) == 0.0 and math.copysign(1, E5M2.value_of(0x80)) == -1


@pytest.mark.parametrize("fmt", [E4M3FNUZ, E5M2FNUZ], ids=["e4m3fnuz", "e5m2fnuz"])
def test_fnuz_has_no_negative_zero_and_a_single_nan(fmt):
    assert not fmt.has_negative_zero
    values = fmt.all_values()
    assert [c for c, v in enumerate(values) if math.isnan(v)] == [0x80]
    assert sum(1 for v in values if v == 0) == 1


def test_e8m0_codes_are_powers_of_two():
    for code in range(255):
        assert E8M0FNU.value_of(code) == 2.0 ** (code - 127)
    assert not E8M0FNU.has_zero and not E8M0FNU.signed


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_values_are_ordered_by_code_within_a_sign(fmt):
    # positive codes increase in value; for signed formats the negative half mirrors them
    vals = [v for v in fmt.all_values()[: 128 if fmt.signed else 256] if math.isfinite(v)]
    assert vals == sorted(vals) and len(set(vals)) == len(vals)
    if fmt.signed:
        for c in range(1, 128):
            a, b = fmt.value_of(c), fmt.value_of(c | 0x80)
            assert (math.isnan(a) and math.isnan(b)) or a == -b or (fmt.nan_rule == "fnuz" and c == 0)


# --- torch.finfo -----------------------------------------------------------------------------
# torch.finfo field -> the derived value it should equal
def _torch_expected(fmt: FloatFormat) -> dict:
    return {
        "bits": 8,
        "max": fmt.max,
        "min": -fmt.max if fmt.signed else fmt.min_normal,
        "smallest_normal": fmt.min_normal,
        "tiny": fmt.min_normal,
        "eps": fmt.eps,
    }


# (format, field) -> (what torch says, where seen, the first release that derives it right).
# torch derived finfo.eps for e5m2fnuz as 2^-3 although the format has 2 mantissa bits (eps 2^-2,
# as ml_dtypes and the definition say); 2.15.0 derives 2^-2 (docs/version-matrix.md). The xfail
# holds only before that release, so the fixed ones must pass and an older one that stops
# deviating fails as XPASS.
TORCH_FINFO_KNOWN = {("e5m2fnuz", "eps"): (0.125, "torch 2.9.1 to 2.14.1", (2, 15))}
_TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])

_torch_cases = []
for _f in select(has_torch_dtype=True):
    for _field in _torch_expected(_f):
        _known = TORCH_FINFO_KNOWN.get((_f.name, _field))
        _marks = (
            [
                pytest.mark.xfail(
                    _TORCH < _known[2],
                    reason=f"known torch discrepancy: finfo({_f.name}).{_field} = {_known[0]} "
                    f"(seen on {_known[1]}), derived {_torch_expected(_f)[_field]}",
                    strict=True,
                )
            ]
            if _known
            else []
        )
        _torch_cases.append(pytest.param(_f, _field, marks=_marks, id=f"{_f.name}-{_field}"))


@pytest.mark.parametrize("fmt,field", _torch_cases)
def test_torch_finfo_matches_derived(fmt, field, skip_if_refused):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"finfo of {fmt.name}")
    dtype = fmt.torch_dtype()
    got = getattr(torch.finfo(dtype), field)
    want = _torch_expected(fmt)[field]
    assert got == want, f"torch {torch.__version__}: finfo({fmt.torch_name}).{field} = {got!r}, derived {want!r}"


# --- ml_dtypes.finfo ------------------------------------------------------------------------
def _ml_expected(fmt: FloatFormat) -> dict:
    return {
        "bits": 8,
        "max": fmt.max,
        "smallest_normal": fmt.min_normal,
        "smallest_subnormal": fmt.min_subnormal,
        "eps": fmt.eps,
        "nexp": fmt.exp_bits,
        "nmant": fmt.man_bits,
        "minexp": fmt.emin,
        "maxexp": fmt.emax + 1,  # numpy convention: the first exponent that overflows
    }


@pytest.mark.needs("ml_dtypes")
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_ml_dtypes_finfo_matches_derived(fmt):
    import ml_dtypes

    t = fmt.ml_dtype()
    if t is None:
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {fmt.ml_dtypes_name}")
    fi = ml_dtypes.finfo(t)
    diffs = []
    for field, want in _ml_expected(fmt).items():
        got = getattr(fi, field)
        got = got if isinstance(got, int) else float(got)
        if got != want:
            diffs.append(f"{field}: ml_dtypes {got!r}, derived {want!r}")
    assert not diffs, f"ml_dtypes {ml_dtypes.__version__} finfo({fmt.name}):\n" + "\n".join(diffs)


# --- lookup and errors ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["e4m3fn", "float8_e4m3fn", "torch.float8_e4m3fn", "E4M3FN"])
def test_get_format_accepts_names(name):
    assert get_format(name) is E4M3FN


def test_get_format_rejects_unknown_names_and_types():
    with pytest.raises(ValueError, match="fmt: expected one of"):
        get_format("e3m4")
    with pytest.raises(TypeError, match="fmt: expected a FloatFormat"):
        get_format(torch.float8_e4m3fn)


def test_format_definition_is_validated():
    with pytest.raises(ValueError, match="must be 8"):
        FloatFormat(
            name="bad", exp_bits=4, man_bits=4, bias=7, signed=True, nan_rule="ieee", torch_name="x", ml_dtypes_name="x"
        )
    with pytest.raises(ValueError, match="nan_rule"):
        FloatFormat(
            name="bad",
            exp_bits=4,
            man_bits=3,
            bias=7,
            signed=True,
            nan_rule="weird",
            torch_name="x",
            ml_dtypes_name="x",
        )
    with pytest.raises(ValueError, match="code: expected an integer"):
        E4M3FN.value_of(256)
