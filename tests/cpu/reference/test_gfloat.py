"""gfloat, a third independent oracle: decode of every code, and rounding (RNE and RTZ, saturating
and not; SR with mirrored random bits where its rule and fp8ref's coincide) on the same input
classes the definition is checked on, for every format gfloat defines (``harness.oracles.gfloat_oracle``:
OCP E4M3/E5M2/E8M0, MX FP6/FP4, and E4M3FNUZ/E5M2FNUZ as P3109 finite formats; UE4M3 has none);
and MX block scaling (FLOOR) through gfloat's block quantization. The inputs gfloat leaves
undefined or reads differently are left out, by reason, and counted in the end-of-run section.
"""

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import definition_input_classes
from fp8ref.harness.oracles import gfloat_oracle as gfo
from fp8ref.harness.oracles.definition_check import DefinitionReport, sr_bit_sets
from fp8ref.reference.codec import decode, decode_table, encode
from fp8ref.reference.formats import FORMATS, select
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import mx

pytestmark = pytest.mark.needs("gfloat", "numpy")

GFLOAT_FORMATS = [pytest.param(f, id=f.name) for f in FORMATS.values() if f.name != "ue4m3"]
CLASSES = ["bf16 patterns", "f16 patterns", "f32 subnormals", "f32 boundaries", "f32 random"]
MODES = [("rne", False), ("rne", True), ("rtz", False), ("rtz", True), ("sr", False), ("sr", True)]


def _same(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    return ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))


def _report(fmt: str, inputs: str, mode: str, compared: int, mismatches: int) -> DefinitionReport:
    """One comparison with gfloat, for the end-of-run section."""
    return DefinitionReport(f"gfloat {gfo.version()}", fmt, inputs, mode, compared, mismatches, [])


def test_every_format_but_ue4m3_has_a_gfloat_format():
    assert [f.name for f in FORMATS.values() if gfo.gfloat_format(f) is None] == ["ue4m3"]


@pytest.mark.parametrize("fmt", GFLOAT_FORMATS)
def test_every_code_decodes_like_gfloat(fmt, record_oracle_report):
    ours, theirs = decode_table(fmt).double(), gfo.decode_all(fmt)
    bad = (~_same(ours, theirs)).nonzero().flatten().tolist()
    record_oracle_report(_report(fmt.name, "every code", "decode", fmt.n_codes, len(bad)))
    assert not bad, ", ".join(f"0x{c:02x}: fp8ref {ours[c].item()!r}, gfloat {theirs[c].item()!r}" for c in bad[:8])


@pytest.mark.exhaustive
@pytest.mark.parametrize("inputs", CLASSES)
@pytest.mark.parametrize("fmt", GFLOAT_FORMATS)
def test_rounding_matches_gfloat(fmt, inputs, record_oracle_report, record_observation):
    x = definition_input_classes(fmt)[inputs]
    random_bits = sr_bit_sets(x, fmt)["random"]
    failures, left_out = [], {}
    for rounding, saturate in MODES:
        skip = gfo.undefined_in_gfloat(x, fmt, rounding=rounding, saturate=saturate)
        keep = ~torch.stack(list(skip.values())).any(0) if skip else torch.ones_like(x, dtype=torch.bool)
        for reason, mask in skip.items():
            left_out[reason] = left_out.get(reason, 0) + int(mask.sum())
        xs, bits = x[keep], random_bits[keep]
        kw = {"random_bits": bits} if rounding == "sr" else {}
        ours = decode(encode(xs, fmt, saturate=saturate, rounding=rounding, **kw), fmt).double()
        theirs = gfo.round_values(xs, fmt, rounding=rounding, saturate=saturate, **kw)
        bad = (~_same(ours, theirs)).nonzero().flatten()
        mode = f"{rounding}{' sat' if saturate else ''}"
        record_oracle_report(_report(fmt.name, inputs, mode, xs.numel(), bad.numel()))
        failures += [
            f"{mode}: {xs[i].item()!r} -> fp8ref {ours[i].item()!r}, gfloat {theirs[i].item()!r}"
            for i in bad[:4].tolist()
        ]
    record_observation(
        f"gfloat.left_out.{fmt.name}.{inputs.replace(' ', '_')}",
        ", ".join(f"{k}: {v:,}" for k, v in sorted(left_out.items()) if v) or "none",
    )
    assert not failures, "\n".join(failures)


def _mx_blocks() -> dict[str, torch.Tensor]:
    """Blocks of 32 (float32) that decide MX scaling: random magnitudes, blocks reaching each
    element format's max and the E8M0 range's ends, zeros, float32 subnormals, tiny normals."""
    gen = torch.Generator().manual_seed(5)
    rnd = torch.randn(24, 32, generator=gen) * torch.exp2(torch.arange(-60, 60, 5, dtype=torch.float32))[:, None]
    edges = torch.randn(6, 32, generator=gen)
    edges[:, 0] = torch.tensor([448.0, 57344.0, 28.0, 7.5, 6.0, 2.0**127])
    return {
        "random": rnd,
        "max and range ends": edges,
        "zero": torch.zeros(2, 32),
        "float32 subnormal": torch.randn(4, 32, generator=gen) * 2.0**-135,
        "tiny normal": torch.randn(4, 32, generator=gen) * 2.0**-124,
    }


@pytest.mark.parametrize("element", [pytest.param(f, id=f.name) for f in select(mx_element=True)])
def test_mx_block_scaling_matches_gfloat(element, record_oracle_report):
    """FLOOR scale (E8M0, from the block's amax) and the saturated RNE elements, per block."""
    failures, compared = [], 0
    for name, blocks in _mx_blocks().items():
        q = quantize(blocks, element, mx(32))
        scales = decode(q.scale_e8m0, FORMATS["e8m0fnu"]).double().reshape(-1)
        values = decode(q.codes, element).double() * scales.repeat_interleave(32).reshape(blocks.shape)
        for b in range(blocks.shape[0]):
            scale, theirs = gfo.mx_block(blocks[b], element)
            compared += 1
            if scale != scales[b].item() or not torch.equal(values[b], theirs):
                failures.append(f"{name} block {b}: scale fp8ref {scales[b].item()!r}, gfloat {scale!r}")
    record_oracle_report(_report(element.name, "MX blocks", "mx floor", compared, len(failures)))
    assert not failures, "\n".join(failures[:8])


def test_gfloat_reads_a_nan_scaled_block_as_nan_and_its_special_block_scales_are_observed(record_observation):
    """The spec fixes that a NaN scale (0xFF) makes every element NaN: gfloat's block decode too.
    Which scale a block holding inf or NaN gets it leaves open: gfloat's is observed (docs/design.md,
    "MX blocks holding inf or NaN")."""
    import numpy as np
    from gfloat import compute_scale_amax, decode_block
    from gfloat.formats import format_info_mxfp8_e4m3

    assert all(np.isnan(v) for v in decode_block(format_info_mxfp8_e4m3, [0xFF] + [0x38] * 32))
    words = []
    for special in ("inf", "-inf", "nan"):
        block = np.ones(32)
        block[3] = float(special)
        with np.errstate(invalid="ignore"):
            scale = compute_scale_amax(FORMATS["e4m3fn"].emax, block)
        code = int(encode(torch.tensor([float(scale)]), FORMATS["e8m0fnu"], saturate=True)[0])
        words.append(f"{special} 0x{code:02x}")
    record_observation(f"gfloat {gfo.version()} mx floor: E8M0 scale of a block holding inf/NaN", " ".join(words))
