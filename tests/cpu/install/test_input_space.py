"""The configuration space around a cast, beyond contiguous float32/bf16 tensors decoded through
``.float()``: every decode target, non-contiguous sources, float64 sources, float16 and sliced
inputs to torchao's dynamic cast.

Guards: a decode path to float16 or bfloat16 that rounds through another type or loses the sign
of zero; a cast or decode kernel that reads a transposed, sliced or offset tensor as if it were
contiguous; a change in how a float64 source is rounded (pinned: ``cast.<fmt>.f64.rounding``)."""

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import (
    all_16bit_inputs,
    float32_structured_inputs,
    float64_double_rounding_inputs,
    training_tensor_with,
)
from fp8ref.harness.casts.conformance import float64_rounding
from fp8ref.harness.casts.implementations import ml_dtypes_cast, torch_cast
from fp8ref.harness.casts.input_space import (
    as_matrix,
    decode_mismatches,
    layout_bit_mismatches,
    layout_mismatches,
    layouts,
    same_bits,
)
from fp8ref.harness.stack import probes
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN, E5M2, FloatFormat, select
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import axiswise, tensorwise
from tests.common.params import TORCH_FORMATS

TARGETS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
METHODS = {torch.float16: "half", torch.bfloat16: "bfloat16", torch.float32: "float", torch.float64: "double"}


@pytest.mark.exhaustive
@pytest.mark.parametrize("spelling", ["to", "method"])
@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_every_code_decodes_to_every_target(fmt, target, spelling, skip_if_refused):
    """Every code to float16, bfloat16, float32 and float64, through ``.to(dtype)`` and through
    ``.half()/.bfloat16()/.float()/.double()``: the format's exact value (fp8ref's decode) rounded
    once to the target; E8M0's extremes overflow float16 to inf and underflow it to 0."""
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"decodes {fmt.name}")

    def codes_to(codes):
        fp8 = codes.view(fmt.torch_dtype())
        return fp8.to(target) if spelling == "to" else getattr(fp8, METHODS[target])()

    bad = decode_mismatches(codes_to, fmt, target)
    assert not bad, f"{fmt.name} -> {target} via {spelling}: " + ", ".join(bad[:8])


@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_casts_of_non_contiguous_sources_match_the_codec(fmt, source, skip_if_refused):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"casts to {fmt.name}")
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 96, generator=gen) * 40).to(source)
    bad = layout_mismatches(lambda view: view.to(fmt.torch_dtype()).view(torch.uint8), x, fmt)
    assert not bad, f"{fmt.name} from {source} views that cast unlike the codec: {bad}"


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_decoding_a_non_contiguous_float8_view_matches_the_codec(fmt, skip_if_refused):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"decodes {fmt.name}")
    codes = torch.randint(0, 256, (64, 96), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    for name, view in layouts(codes).items():
        got = view.view(fmt.torch_dtype()).float()
        want = decode(view.contiguous(), fmt)
        assert bool(same_bits(got, want).all()), f"{fmt.name}: decoding a {name} view"


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_float64_sources_round_once_or_through_float32_and_the_profile_says_which(
    fmt, skip_if_refused, record_observation
):
    """How a float64 tensor is cast is implementation-defined: rounded once, or to float32 first
    (a double rounding on inputs just beyond a tie). Either is a known answer, recorded here and
    pinned as ``cast.<fmt>.f64.rounding``; anything else (some inputs one way, some the other) is a
    bug. ml_dtypes, the second oracle, is asked too."""
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"casts to {fmt.name}")
    x, once, via = float64_double_rounding_inputs(fmt)
    assert x.dtype == torch.float64 and x.numel() > 0 and bool((once != via).all())
    answers = {"torch": float64_rounding(torch_cast(fmt), fmt)}
    ml = ml_dtypes_cast(fmt)
    if ml is not None:
        answers["ml_dtypes"] = float64_rounding(ml, fmt)
    record_observation(f"float64 -> {fmt.name}", ", ".join(f"{k}: {v}" for k, v in answers.items()))
    assert all(v in ("once", "through float32") for v in answers.values()), answers


@pytest.mark.parametrize("fmt", [E4M3FN, E5M2], ids=lambda f: f.name)
def test_the_double_rounding_inputs_tell_the_two_answers_apart(fmt):
    """The inputs' own check: rounded to float32 they are the codec's tie (the even neighbour);
    their exact value is nearer the odd neighbour."""
    x, once, via = float64_double_rounding_inputs(fmt)
    assert torch.equal(encode(x.float(), fmt), via)
    once_vals, via_vals = decode(once, fmt).double(), decode(via, fmt).double()
    assert bool(((x - once_vals).abs() < (x - via_vals).abs()).all())


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("g", [tensorwise(), axiswise(-1)], ids=str)
@pytest.mark.parametrize("source", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_torchao_dynamic_cast_of_views_and_float16_is_bitwise_the_reference(source, g):
    """torchao's dynamic cast (scale and codes) of float16 sources and of non-contiguous views,
    against fp8ref's quantize of the same values."""
    from fp8ref.harness.ao import torchao_compat as ao

    gen = torch.Generator().manual_seed(2)
    x = (torch.randn(64, 96, generator=gen) * torch.exp2(torch.randint(-6, 6, (64, 1), generator=gen).float())).to(
        source
    )
    for name, view in {"contiguous": x, "transposed": x.t(), "column slice": x[:, 5:69]}.items():
        codes, scale = ao.dynamic_cast(view, E4M3FN, g, False)
        q = quantize(view.contiguous(), E4M3FN, g)
        assert torch.equal(scale.float().reshape(q.scale.shape), q.scale), f"{source} {name} {g}: scale"
        assert torch.equal(codes.reshape(q.codes.shape), q.codes), f"{source} {name} {g}: codes"


def test_the_formats_decode_exactly_in_bfloat16_and_float32():
    """The decode test's premise: every FP8 and E8M0 value is exact in bfloat16 and float32 (so a
    decode there may not round at all), while float16 cannot hold E8M0's range."""
    for fmt in select(has_torch_dtype=True):
        v = decode(torch.arange(256, dtype=torch.int32).to(torch.uint8), fmt).double()
        finite = v[torch.isfinite(v)]
        assert torch.equal(finite.to(torch.bfloat16).double(), finite), fmt.name
        assert torch.equal(finite.float().double(), finite), fmt.name


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("g", [tensorwise(), axiswise(-1)], ids=str)
@pytest.mark.parametrize("special", ["nan", "inf", "-inf"])
def test_a_nan_or_inf_inside_an_activation_is_cast_as_the_reference_casts_it(special, g, record_observation):
    """What torchao's scale and cast make of a NaN or inf inside a training tensor is
    implementation-defined (pinned: ``torchao.special.*``): with torchao 0.18 a NaN gives a NaN
    scale and NaN codes for its whole scaling group, an inf a zero scale (so inf * 0 = NaN and
    the group's finite values become zeros). Held bitwise to fp8ref's formula, which propagates
    them the same way, so a change in either shows."""
    from fp8ref.harness.ao import torchao_compat as ao

    x = training_tensor_with(special)
    codes, scale = ao.dynamic_cast(x, E4M3FN, g, False)
    q = quantize(x, E4M3FN, g)
    hexes = " ".join(f"{c:02x}" for c in codes.flatten().tolist())
    record_observation(
        f"torchao {g} cast of an activation holding {special}",
        f"scale {[float(v) for v in scale.flatten().tolist()]}, codes {hexes}",
    )
    assert bool(same_bits(scale.float().reshape(q.scale.shape), q.scale).all()), (scale, q.scale)
    assert torch.equal(codes.reshape(q.codes.shape), q.codes), (codes, q.codes)


# --- layout invariance on the whole input set --------------------------------------------------
def _every_input(source: torch.dtype, fmt: FloatFormat) -> torch.Tensor:
    """Every bfloat16/float16 pattern, or float32's structured inputs (specials first): overflow,
    +-inf, NaN payloads and subnormals included."""
    if source == torch.float32:
        parts = float32_structured_inputs(fmt)
        return torch.cat([parts["specials"], *(v for k, v in parts.items() if k != "specials")])
    return all_16bit_inputs(source)


@pytest.mark.exhaustive
@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_casts_of_views_equal_the_contiguous_cast_on_every_input(fmt, source, skip_if_refused):
    """A transposed, sliced, strided, offset or expanded view casts bit for bit as its contiguous
    copy, on every input: not only values in range (those are held to the codec above) but the
    implementation-defined answers too, overflow, +-inf and NaN codes."""
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"casts to {fmt.name}")
    x = as_matrix(_every_input(source, fmt))
    bad = layout_bit_mismatches(lambda v: v.to(fmt.torch_dtype()).view(torch.uint8), x)
    assert not bad, f"{fmt.name} from {source} views that cast unlike their contiguous copy: {bad}"


@pytest.mark.exhaustive
@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_decodes_of_views_equal_the_contiguous_decode_on_every_code(fmt, target, skip_if_refused):
    """Every code (NaN codes and, for E8M0, the extremes that leave float16's range included),
    decoded from each view, bit for bit as from the contiguous copy."""
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"decodes {fmt.name}")
    codes = as_matrix(torch.arange(256, dtype=torch.int32).to(torch.uint8))
    bad = layout_bit_mismatches(lambda v: v.view(fmt.torch_dtype()).to(target), codes)
    assert not bad, f"{fmt.name} -> {target}: views that decode unlike their contiguous copy: {bad}"
