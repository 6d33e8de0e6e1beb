"""A small FP8 container and quantize / dequantize.

``quantize`` follows torchao's float8 cast (``float8_utils`` / ``hp_tensor_and_scale_to_float8``,
v0.18): ``codes = fp8(clamp(float32(x) * scale, -max, max))``; ``dequantize`` is
``decode(codes) / scale`` (in float32, then to the requested dtype). MX uses the same path with
``scale = 2^-e``, i.e. the elements are ``x / X`` for the block's E8M0 scale ``X = 2^e``; the
elements may be FP8, FP6 or FP4 (codes one per byte; ``codec.pack_fp4`` packs FP4 pairs). NVFP4
has a scale of its own kind: see ``fp8ref.reference.nvfp4``.

By default the FP8 codes come from fp8ref's codec. ``cast="native"`` uses torch's own
``Tensor.to(torch.float8_*)`` instead, for speed or to reproduce torchao end to end; it is only
as trustworthy as the cast conformance tests say torch's cast is on this install.
"""

from __future__ import annotations

import dataclasses

import torch

from .codec import Rounding, decode, encode
from .formats import E8M0FNU, FloatFormat, get_format
from .scaling import EPS, Granularity, Kind, compute_scale, expand_scale, tensorwise
from .validate import Choice, choice, instance, positive_finite, tensor

__all__ = ["Cast", "Quantized", "quantize", "dequantize", "quantize_with_scale"]


class Cast(Choice):
    """Where the FP8 codes come from."""

    CODEC = "codec"  # fp8ref's codec (the reference; the default)
    NATIVE = "native"  # torch's Tensor.to(torch.float8_*): opt-in, as trusted as its conformance tests


@dataclasses.dataclass(frozen=True)
class Quantized:
    """Quantized codes (FP8, FP6 or FP4 elements) plus what it takes to read them back.

    codes: uint8, the shape of the original tensor. scale: float32 per scaling group (torchao
    convention: multiplied on quantize). granularity, fmt, orig_dtype: as quantized.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    granularity: Granularity
    fmt: FloatFormat
    orig_dtype: torch.dtype

    @property
    def shape(self) -> torch.Size:
        return self.codes.shape

    @property
    def scale_inv(self) -> torch.Tensor:
        """TransformerEngine's convention: what dequantize multiplies by."""
        return (1.0 / self.scale).to(torch.float32)

    @property
    def scale_e8m0(self) -> torch.Tensor:
        """MX only: the block scales as E8M0 codes (``X = 2^e = 1 / scale``)."""
        if self.granularity.kind != Kind.MX:
            raise ValueError(f"scale_e8m0: only MX data has E8M0 scales, this is {self.granularity}")
        return encode(self.scale_inv, E8M0FNU)

    def values(self) -> torch.Tensor:
        """The FP8 values before unscaling, float32."""
        return decode(self.codes, self.fmt)

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        return dequantize(self, dtype)


def _cast(y: torch.Tensor, fmt: FloatFormat, cast: Cast, rounding: Rounding) -> torch.Tensor:
    if cast == Cast.CODEC:
        return encode(y, fmt, saturate=True, rounding=rounding)
    if rounding != Rounding.RNE:
        raise ValueError(f"rounding: cast='native' rounds to nearest only, got {rounding}")
    dtype = fmt.torch_dtype()
    if dtype is None:
        raise ValueError(f"cast: torch {torch.__version__} has no {fmt.torch_name} for cast='native'")
    return y.to(dtype).view(torch.uint8)


def quantize_with_scale(
    x: torch.Tensor,
    scale: torch.Tensor | float,
    fmt: str | FloatFormat,
    granularity: Granularity | None = None,
    *,
    cast: Cast | str = Cast.CODEC,
    rounding: Rounding | str = Rounding.RNE,
) -> Quantized:
    """Quantize with a given scale (static or delayed scaling). ``scale``: positive and finite,
    shaped per group (``scaling.scale_shape``; one value for tensorwise). ``rounding``: the codec's
    rounding mode (``rne``, ``rtz``, ``sr`` from torch's default generator, so
    ``torch.manual_seed`` makes it repeatable). float64 ``x`` is rounded to float32 first."""
    positive_finite(scale, "scale")
    return _quantize_with_scale(x, scale, fmt, granularity, cast=cast, rounding=rounding)


def _quantize_with_scale(
    x: torch.Tensor,
    scale: torch.Tensor | float,
    fmt: str | FloatFormat,
    granularity: Granularity | None = None,
    *,
    cast: Cast | str = Cast.CODEC,
    rounding: Rounding | str = Rounding.RNE,
) -> Quantized:
    """quantize_with_scale without the scale check: current scaling's scale may be NaN or 0 for a
    group holding NaN or inf (see ``scaling``), and that is its documented result."""
    fmt = get_format(fmt)
    g = granularity if granularity is not None else tensorwise()
    tensor(x, "x", floating=True)
    cast = choice(cast, Cast, "cast")
    rounding = choice(rounding, Rounding, "rounding")
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        scale = torch.tensor(float(scale), dtype=torch.float32, device=x.device)
    scale = instance(scale, torch.Tensor, "scale", "a tensor or a number")
    assert isinstance(scale, torch.Tensor)  # (for the type checker: instance() said so)
    s = expand_scale(scale.to(device=x.device, dtype=torch.float32), g, x.shape)
    y = (x.to(torch.float32) * s).clamp(-fmt.max, fmt.max)
    if not fmt.has_nan:
        # FP4/FP6 have no NaN: a group whose scale is NaN (its amax was) carries it in the scale
        # and writes code 0; a NaN under a finite scale stays NaN and the codec refuses it
        y = y.masked_fill(torch.isnan(s), 0.0)
    return Quantized(_cast(y, fmt, cast, rounding), scale.to(torch.float32), g, fmt, x.dtype)


def quantize(
    x: torch.Tensor,
    fmt: str | FloatFormat,
    granularity: Granularity | None = None,
    *,
    pow2: bool = False,
    eps: float = EPS,
    margin: int = 0,
    cast: Cast | str = Cast.CODEC,
    rounding: Rounding | str = Rounding.RNE,
) -> Quantized:
    """Current scaling: compute the scale from ``x`` itself, then quantize."""
    g = granularity if granularity is not None else tensorwise()
    scale = compute_scale(x, fmt, g, pow2=pow2, eps=eps, margin=margin)
    return _quantize_with_scale(x, scale, fmt, g, cast=cast, rounding=rounding)


def dequantize(q: Quantized, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``decode(codes) / scale`` in float32, then ``dtype`` (default: the original dtype)."""
    instance(q, Quantized, "q", "an Quantized")
    s = expand_scale(q.scale, q.granularity, q.codes.shape)
    return (q.values() / s).to(dtype or q.orig_dtype)
