"""FP4/FP6 (OCP MX) and UE4M3 (NVFP4's scale): constants, codec, packing, and casts elsewhere.

The codec is proved against the definition for these formats as for every other
(tests/cpu/reference/test_definition.py, and gfloat in tests/cpu/reference/test_gfloat.py); here: ml_dtypes' casts and
torchao's f32 -> FP4/FP6 helpers against it, on every bfloat16 and float16 pattern plus float32
ties and boundaries. NaN has no code in FP4/FP6: what each implementation writes for it is
reported, not judged.
"""

import pytest
import torch

from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.harness.casts.cast_inputs import all_16bit_inputs, float32_structured_inputs
from fp8ref.harness.casts.conformance import check_cast
from fp8ref.harness.casts.implementations import ml_dtypes_cast
from fp8ref.reference.codec import decode, encode, pack_fp4, unpack_fp4
from fp8ref.reference.formats import E2M1FN, E2M3FN, E3M2FN, E4M3FN, UE4M3, select

ELEMENTS = [pytest.param(f, id=f.name) for f in (E2M1FN, E2M3FN, E3M2FN)]
NARROW = [*ELEMENTS, pytest.param(UE4M3, id=UE4M3.name)]
IMPLS = [
    pytest.param("ml_dtypes", marks=pytest.mark.needs("ml_dtypes")),
    pytest.param("torchao", marks=pytest.mark.needs("torchao")),
]


def _impl(name, fmt):
    impl = ml_dtypes_cast(fmt) if name == "ml_dtypes" else ao.narrow_cast(fmt)
    if impl is None:
        pytest.skip(f"{name} has no cast to {fmt.name} on this install")
    return impl


@pytest.mark.needs("ml_dtypes")
@pytest.mark.parametrize("fmt", ELEMENTS)
def test_derived_constants_match_ml_dtypes_finfo(fmt):
    import ml_dtypes

    fi = ml_dtypes.finfo(fmt.ml_dtype())
    assert (fi.bits, fi.nexp, fi.nmant) == (fmt.bits, fmt.exp_bits, fmt.man_bits)
    assert float(fi.max) == fmt.max
    assert float(fi.tiny) == fmt.min_normal
    assert float(fi.smallest_subnormal) == fmt.min_subnormal
    assert float(fi.eps) == fmt.eps


def test_the_ocp_mx_constants():
    """OCP MX v1.0, tables of the FP6/FP4 element formats: max normal and min subnormal."""
    assert (E2M1FN.max, E2M1FN.min_subnormal, E2M1FN.emax) == (6.0, 0.5, 2)
    assert (E2M3FN.max, E2M3FN.min_subnormal, E2M3FN.emax) == (7.5, 0.125, 2)
    assert (E3M2FN.max, E3M2FN.min_subnormal, E3M2FN.emax) == (28.0, 0.0625, 4)
    for f in (E2M1FN, E2M3FN, E3M2FN):
        assert not f.has_nan and not f.has_inf and f.has_negative_zero
        assert f.value_of(f.n_codes >> 1) == 0.0 and str(f.value_of(f.n_codes >> 1)) == "-0.0"
    assert sorted(f.name for f in select(mx_element=True)) == sorted(["e4m3fn", "e5m2", "e2m3fn", "e3m2fn", "e2m1fn"])


def test_ue4m3_is_the_positive_half_of_e4m3fn():
    """NVFP4 stores its scale in a float8_e4m3fn byte with the sign clear: the 128 UE4M3 codes
    must be E4M3FN's codes 0..127, value for value, NaN at 0x7F."""
    assert UE4M3.n_codes == 128 and UE4M3.nan_codes == (0x7F,) and UE4M3.max == E4M3FN.max == 448.0
    codes = torch.arange(128, dtype=torch.uint8)
    ours, theirs = decode(codes, UE4M3), decode(codes, E4M3FN)
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    assert torch.equal(ours.nan_to_num(), theirs.nan_to_num())
    x = all_16bit_inputs(torch.bfloat16)
    x = x[~torch.signbit(x) & ~torch.isnan(x)]
    assert torch.equal(encode(x, UE4M3, saturate=True), encode(x, E4M3FN, saturate=True))
    # no sign: negatives have no code
    assert encode(torch.tensor([-1.0, -0.0]), UE4M3).tolist() == [0x7F, 0x00]


@pytest.mark.parametrize("fmt", ELEMENTS)
def test_nan_has_no_code_and_is_refused(fmt):
    with pytest.raises(ValueError, match=f"{fmt.name} has no NaN"):
        encode(torch.tensor([1.0, float("nan")]), fmt)
    # overflow and inf saturate in either mode: there is no inf or NaN to write
    big = torch.tensor([1e30, float("inf"), -float("inf")])
    assert torch.equal(encode(big, fmt, saturate=False), encode(big, fmt, saturate=True))
    assert decode(encode(big, fmt), fmt).tolist() == [fmt.max, fmt.max, -fmt.max]


@pytest.mark.exhaustive
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("impl_name", IMPLS)
@pytest.mark.parametrize("fmt", ELEMENTS)
def test_all_16bit_patterns_cast_like_the_codec(fmt, impl_name, dtype, record_cast_report):
    impl = _impl(impl_name, fmt)
    report = check_cast(impl, all_16bit_inputs(dtype), fmt, f"all {dtype}".replace("torch.", ""))
    record_cast_report(report)
    assert sum(report.counts.values()) == 1 << 16
    assert report.ok, report.failure_message()


@pytest.mark.parametrize(
    "inputs", ["representable", "midpoints", "midpoints_pm_ulp", "overflow_boundary", "subnormal_range", "specials"]
)
@pytest.mark.parametrize("impl_name", IMPLS)
@pytest.mark.parametrize("fmt", ELEMENTS)
def test_float32_ties_and_boundaries_cast_like_the_codec(fmt, impl_name, inputs, record_cast_report):
    impl = _impl(impl_name, fmt)
    report = check_cast(impl, float32_structured_inputs(fmt)[inputs], fmt, f"float32 {inputs}")
    record_cast_report(report)
    assert report.ok, report.failure_message()


@pytest.mark.exhaustive
@pytest.mark.parametrize("impl_name", IMPLS)
@pytest.mark.parametrize("fmt", ELEMENTS)
def test_every_code_decodes_like_the_codec(fmt, impl_name):
    codes = torch.arange(fmt.n_codes, dtype=torch.uint8)
    want = decode(codes, fmt)
    if impl_name == "ml_dtypes":
        import numpy as np

        _impl(impl_name, fmt)
        got = torch.from_numpy(codes.numpy().view(fmt.ml_dtype()).astype(np.float32))
    else:
        got = ao.narrow_decode(codes, fmt)
    same = (got == want) & (torch.signbit(got) == torch.signbit(want))
    bad = (~same).nonzero().flatten().tolist()
    assert not bad, f"{impl_name} decodes {fmt.name} differently: " + ", ".join(
        f"0x{c:02x}: expected {want[c].item()!r}, got {got[c].item()!r}" for c in bad[:8]
    )


# --- packing ----------------------------------------------------------------------------------
def test_pack_fp4_puts_the_even_element_in_the_low_nibble():
    codes = torch.tensor([[0x1, 0x2, 0xF, 0x0]], dtype=torch.uint8)
    assert pack_fp4(codes).tolist() == [[0x21, 0x0F]]
    every = torch.arange(256, dtype=torch.int32)
    pairs = torch.stack([every & 0xF, every >> 4], dim=-1).to(torch.uint8)
    assert torch.equal(pack_fp4(pairs).flatten(), every.to(torch.uint8))
    assert torch.equal(unpack_fp4(pack_fp4(pairs)), pairs)


def test_pack_fp4_refuses_what_it_cannot_pack():
    with pytest.raises(ValueError, match="even last dim"):
        pack_fp4(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="4-bit codes"):
        pack_fp4(torch.tensor([0x10, 0], dtype=torch.uint8))
    with pytest.raises(TypeError, match="codes"):
        pack_fp4(torch.zeros(2))


@pytest.mark.needs("torchao")
def test_pack_fp4_matches_torchaos_pack_uint4():
    codes = torch.randint(0, 16, (8, 64), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    assert torch.equal(pack_fp4(codes), ao.pack_uint4(codes))


def test_pack_fp4_matches_torchs_float4_e2m1fn_x2_reading(skip_if_refused):
    """torch's float4_e2m1fn_x2 is a storage-only dtype with no cast; torch says how it reads the
    two nibbles where it exports one (the ONNX exporter unpacks element 0 from the low nibble)."""
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2")
    try:
        from torch.onnx._internal.exporter._type_casting import unpack_float4x2_as_uint8
    except ImportError as e:
        pytest.skip(f"torch {torch.__version__} has no float4x2 unpacking helper to read the order from: {e}")
    codes = torch.randint(0, 16, (4, 32), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    x2 = pack_fp4(codes).view(torch.float4_e2m1fn_x2)
    assert torch.equal(torch.from_numpy(unpack_float4x2_as_uint8(x2)).reshape(codes.shape), codes)


def test_narrow_codes_out_of_range_are_refused():
    with pytest.raises(ValueError, match="4-bit"):
        decode(torch.tensor([0x10], dtype=torch.uint8), E2M1FN)
    with pytest.raises(ValueError, match="code: expected an integer in \\[0, 63\\]"):
        E2M3FN.value_of(64)
    assert decode(torch.tensor([0x3F], dtype=torch.uint8), E3M2FN).item() == -28.0


def test_narrow_formats_by_name():
    from fp8ref.reference.formats import get_format

    assert get_format("float4_e2m1fn") is E2M1FN and get_format("float6_e3m2fn") is E3M2FN
    assert get_format("ue4m3") is UE4M3
    with pytest.raises(ValueError, match="e2m1fn"):
        get_format("fp4")
