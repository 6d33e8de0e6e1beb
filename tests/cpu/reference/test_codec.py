"""The codec on its own: hand-checked encodings from the spec, its two paths against each
other, shapes and devices, and clear errors for bad input."""

import math

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import float32_structured_inputs
from fp8ref.reference import codec
from fp8ref.reference.codec import _encode_exact, decode, encode, round_to_format
from fp8ref.reference.formats import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0FNU, select
from tests.common.params import TORCH_FORMATS

NAN = math.nan
INF = math.inf

# (format, input, saturate, expected code). Expected codes are worked out by hand from the bit
# definitions: e.g. E4M3FN 1.0 = 0.0111.000 = 0x38; 1.0625 is the midpoint of 1.0 (mantissa 000)
# and 1.125 (001), so ties-to-even gives 1.0; 1.1875 lies between 1.125 (001) and 1.25 (010): 010.
HAND = [
    (E4M3FN, 1.0, False, 0x38),
    (E4M3FN, -1.0, False, 0xB8),
    (E4M3FN, 1.0625, False, 0x38),
    (E4M3FN, 1.1875, False, 0x3A),
    (E4M3FN, 448.0, False, 0x7E),
    (E4M3FN, 464.0, False, 0x7E),  # midpoint of 448 and the missing 480: even mantissa 110 wins
    (E4M3FN, 465.0, False, 0x7F),  # past the midpoint: overflow -> NaN (no inf in E4M3FN)
    (E4M3FN, 465.0, True, 0x7E),
    (E4M3FN, -1e30, True, 0xFE),
    (E4M3FN, INF, True, 0x7E),
    (E4M3FN, -INF, False, 0xFF),
    (E4M3FN, 2.0**-9, False, 0x01),  # min subnormal
    (E4M3FN, 2.0**-10, False, 0x00),  # half of min subnormal: tie, 0 is even
    (E4M3FN, 3 * 2.0**-11, False, 0x01),  # 0.75 x min subnormal rounds up
    (E4M3FN, -0.0, False, 0x80),
    (E4M3FN, NAN, False, 0x7F),
    (E5M2, 57344.0, False, 0x7B),
    (E5M2, 61440.0, False, 0x7C),  # midpoint of max and 2^16: even (2^16) wins -> overflow -> inf
    (E5M2, 61439.0, False, 0x7B),
    (E5M2, 61440.0, True, 0x7B),
    (E5M2, -INF, False, 0xFC),
    (E5M2, 2.0**-16, False, 0x01),
    (E4M3FNUZ, 240.0, False, 0x7F),
    (E4M3FNUZ, 248.0, False, 0x80),  # midpoint above max; mantissa 111 is odd -> rounds up -> NaN
    (E4M3FNUZ, -0.0, False, 0x00),  # no negative zero
    (E4M3FNUZ, -(2.0**-12), False, 0x00),  # rounds to zero, sign dropped
    (E4M3FNUZ, INF, False, 0x80),
    (E4M3FNUZ, INF, True, 0x7F),
    (E5M2FNUZ, 1.0, False, 0x40),
    (E5M2FNUZ, NAN, False, 0x80),
    (E8M0FNU, 1.0, False, 0x7F),
    (E8M0FNU, 1.5, False, 0x80),  # tie between 1 and 2: ties-to-even with no mantissa goes up
    (E8M0FNU, 1.4999, False, 0x7F),
    (E8M0FNU, 0.75, False, 0x7F),
    (E8M0FNU, 2.0**-127, False, 0x00),
    (E8M0FNU, 1e-45, False, 0x00),  # nearest value the format has is 2^-127
    (E8M0FNU, 0.0, False, 0xFF),  # no zero
    (E8M0FNU, -1.0, False, 0xFF),  # no sign
    (E8M0FNU, 2.0**127, False, 0xFE),
    (E8M0FNU, 3 * 2.0**126, False, 0xFF),  # 1.5 x 2^127 rounds to 2^128: overflow
    (E8M0FNU, 3 * 2.0**126, True, 0xFE),
]


@pytest.mark.parametrize(
    "fmt,x,saturate,code", HAND, ids=[f"{f.name}-{x!r}-{'sat' if s else 'nonsat'}" for f, x, s, _ in HAND]
)
@pytest.mark.parametrize("path", ["encode", "exact"])
def test_hand_checked_encodings(fmt, x, saturate, code, path):
    t = torch.tensor([x], dtype=torch.float32)
    got = int(encode(t, fmt, saturate=saturate)) if path == "encode" else int(_encode_exact(t, fmt, saturate))
    assert got == code, f"{fmt.name} encode({x!r}, saturate={saturate}): expected 0x{code:02x}, got 0x{got:02x}"


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_decode_then_encode_returns_every_code(fmt):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    values = decode(codes, fmt)
    back = encode(values, fmt)
    finite = torch.isfinite(values)
    assert torch.equal(back[finite], codes[finite])
    assert bool(torch.isnan(decode(back[torch.isnan(values)], fmt)).all())


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
@pytest.mark.parametrize("saturate", [False, True], ids=["nonsat", "sat"])
def test_float32_fast_path_equals_exact_path(fmt, saturate):
    """The float32 path (round-to-odd into bfloat16, then the table) against the bit-level
    algorithm on the structured inputs and 2^20 random bit patterns."""
    gen = torch.Generator().manual_seed(1234)
    rand = torch.randint(-(2**31), 2**31 - 1, (1 << 20,), dtype=torch.int64, generator=gen).to(torch.int32)
    x = torch.cat([*float32_structured_inputs(fmt).values(), rand.view(torch.float32)])
    fast, exact = encode(x, fmt, saturate=saturate), _encode_exact(x, fmt, saturate)
    bad = (fast != exact).nonzero().flatten()
    assert bad.numel() == 0, "fast != exact at " + ", ".join(
        f"0x{int(x[i].view(torch.int32)) & 0xFFFFFFFF:08x}: fast 0x{int(fast[i]):02x} exact 0x{int(exact[i]):02x}"
        for i in bad[:8]
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_shapes_layouts_and_empty(dtype):
    x = (torch.randn(6, 5, generator=torch.Generator().manual_seed(0)) * 10).to(dtype)
    got = encode(x, E4M3FN)
    assert got.shape == x.shape and got.dtype == torch.uint8
    assert torch.equal(encode(x.t(), E4M3FN), got.t())  # non-contiguous input
    assert torch.equal(encode(x[:, ::2], E4M3FN), got[:, ::2])
    assert encode(torch.empty(0, 3, dtype=dtype), E4M3FN).shape == (0, 3)
    assert torch.equal(encode(x.reshape(-1)[7], E4M3FN), got.reshape(-1)[7])  # 0-d


def test_chunked_path_crosses_chunk_boundaries(monkeypatch):
    monkeypatch.setattr(codec, "_CHUNK", 1000)
    x = torch.randn(4321, generator=torch.Generator().manual_seed(3)) * 100
    assert torch.equal(encode(x, E5M2), _encode_exact(x, E5M2, False))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_inputs_agree_with_float32_inputs(dtype):
    # bfloat16 and float16 values are exact in float32, so both paths must give the same codes
    x = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)
    for fmt in select(has_torch_dtype=True):
        assert torch.equal(encode(x, fmt), encode(x.float(), fmt)), fmt.name


def test_round_to_format_is_decode_of_encode():
    x = torch.tensor([0.3, 1000.0, -7.77])
    assert torch.equal(round_to_format(x, E4M3FN, saturate=True), decode(encode(x, E4M3FN, saturate=True), E4M3FN))


@pytest.mark.parametrize(
    "bad,exc,match",
    [
        ([1.0, 2.0], TypeError, "x: expected a torch.Tensor"),
        (torch.tensor([1.0], dtype=torch.float64), TypeError, "x: expected dtype in"),
        (torch.tensor([1], dtype=torch.int32), TypeError, "x: expected dtype in"),
    ],
)
def test_encode_rejects_bad_input(bad, exc, match):
    with pytest.raises(exc, match=match):
        encode(bad, E4M3FN)


def test_encode_rejects_bad_arguments():
    x = torch.ones(2)
    with pytest.raises(TypeError, match="saturate: expected a bool"):
        encode(x, E4M3FN, saturate="yes")
    with pytest.raises(ValueError, match="fmt: expected one of"):
        encode(x, "e4m4")
    with pytest.raises(TypeError, match="codes: expected dtype"):
        decode(torch.ones(2, dtype=torch.int32), E4M3FN)
    with pytest.raises(TypeError, match="codes: expected a torch.Tensor"):
        decode([1, 2], E4M3FN)
