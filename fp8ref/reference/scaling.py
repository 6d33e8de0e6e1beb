"""amax -> scale, for every granularity FP8 training uses, from the documented formulas.

Convention (torchao's): ``scale`` multiplies on quantize and divides on dequantize,
``codes = encode(clamp(x * scale, -max, max))``, ``x ~= decode(codes) / scale``.
TransformerEngine stores ``scale_inv = 1 / scale`` beside the data; ``to_scale_inv`` converts.

Formulas (cited; nothing here calls torchao or TransformerEngine):
- torchao ``float8_utils.amax_to_scale`` (v0.18): ``scale = float32(fp8_max / clamp(float64(amax),
  min=1e-12))``; power-of-two rounding ``exp2(floor(log2(scale)))``. Here the floor is taken
  exactly (from the float's exponent bits), not through a rounded log2.
- TransformerEngine ``DelayedScaling``: ``scale = (fp8_max / amax) / 2^margin``.
- OCP Microscaling (MX) v1.0, as in torchao ``prototype.mx_formats``: blocks of 32 along the last
  dim, an E8M0 (power-of-two) scale ``X`` per block, elements ``x / X`` cast with saturation.
  FLOOR: ``log2(X) = floor(log2(amax)) - emax_elem`` (emax 8 for E4M3, 15 for E5M2).
  RCEIL (cuBLAS / TransformerEngine): ``log2(X) = ceil(log2(amax / max_elem))``, which never lets
  an element exceed ``max_elem``. torchao 0.18's ``ScaleCalculationMode`` adds two more:
  CEIL ``log2(X) = ceil(log2(amax)) - emax_elem``, and EVEN ``log2(X) = floor(log2(r(amax))) -
  emax_elem`` where ``r`` rounds amax to the element format's significand width (man_bits
  fraction bits, ties away from zero), so an amax within half an element ulp of the next power
  of two takes that power. All clamped to E8M0's range [-127, 127]. Any block size along the
  last dim (the OCP spec names 32; torchao's emulated path takes any divisor of the row).
- DeepSeek-V3: activations in 1x128 tiles, weights in 128x128 blocks.

Granularities whose block does not divide the tensor's shape raise a ValueError (no silent
padding): a partial tile would need a choice (pad with zeros? its own amax?) that the recipes
this models make differently.

Special amax values, all following the formulas above: amax 0 gives ``fp8_max / 1e-12`` (the eps
clamp; zeros quantize to zero); amax inf gives scale 0 and amax NaN gives scale NaN, so a tensor
holding inf/NaN does not quantize to anything meaningful under current scaling (delayed scaling
keeps the previous scale instead: see ``delayed``). For MX, non-finite amax gives a NaN scale
(E8M0 0xFF) and amax 0 the smallest scale, 2^-127.
"""

from __future__ import annotations

import dataclasses
import typing

import torch

from .formats import E8M0FNU, FloatFormat, get_format
from .validate import Choice, boolean, choice, instance, integer, positive_number, tensor

__all__ = [
    "EPS",
    "Granularity",
    "Kind",
    "MxMode",
    "tensorwise",
    "axiswise",
    "tile",
    "block",
    "mx",
    "nvfp4",
    "amax",
    "amax_to_scale",
    "round_down_to_pow2",
    "mx_scale_exponent",
    "compute_scale",
    "expand_scale",
    "scale_shape",
    "to_scale_inv",
    "from_scale_inv",
]

EPS = 1e-12  # torchao float8_utils.EPS


class Kind(Choice):
    """How many elements share one scale (see ``Granularity``)."""

    TENSORWISE = "tensorwise"
    AXISWISE = "axiswise"
    TILE = "tile"
    BLOCK = "block"
    MX = "mx"
    NVFP4 = "nvfp4"


class MxMode(Choice):
    """How an MX block's E8M0 scale exponent is rounded from its amax."""

    FLOOR = "floor"  # OCP MX v1.0: floor(log2(amax)) - emax of the element format
    RCEIL = "rceil"  # ceil(log2(amax / max)): never saturates (torchao ScaleCalculationMode.RCEIL)
    CEIL = "ceil"  # ceil(log2(amax)) - emax: never saturates, coarser than RCEIL
    EVEN = "even"  # floor(log2(amax rounded to the element's significand)) - emax


@dataclasses.dataclass(frozen=True)
class Granularity:
    """How many elements share one scale.

    kind: ``tensorwise`` (one scale); ``axiswise`` (one per slice, reducing along ``dim``, as
    torchao's ``axiswise_dim``); ``tile`` (1 x ``size`` along the last dim); ``block``
    (``size`` x ``size`` over the last two dims); ``mx`` (1 x ``size`` along the last dim with a
    power-of-two E8M0 scale, ``mx_mode`` ``floor`` or ``rceil``); ``nvfp4`` (1 x 16 with a UE4M3
    scale, ``two_level`` adding a per-tensor one: quantized by ``fp8ref.reference.nvfp4``, not ``quantize``).
    """

    kind: Kind
    dim: int | None = None
    size: int | None = None
    mx_mode: MxMode | None = None
    two_level: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", choice(self.kind, Kind, "kind"))
        if self.kind == Kind.AXISWISE and (not isinstance(self.dim, int) or isinstance(self.dim, bool)):
            raise TypeError(f"dim: expected an int for axiswise granularity, got {self.dim!r}")
        if self.kind in (Kind.TILE, Kind.BLOCK, Kind.MX, Kind.NVFP4):
            if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 1:
                raise ValueError(f"size: expected a positive int for {self.kind} granularity, got {self.size!r}")
        if self.kind == Kind.MX:
            object.__setattr__(self, "mx_mode", choice(self.mx_mode, MxMode, "mx_mode"))
        boolean(self.two_level, "two_level")

    def __str__(self) -> str:
        return {
            "tensorwise": "tensorwise",
            "axiswise": f"axiswise(dim={self.dim})",
            "tile": f"1x{self.size}",
            "block": f"{self.size}x{self.size}",
            "mx": f"mx{self.size}-{self.mx_mode}",
            "nvfp4": f"nvfp4 1x{self.size}" + (" two-level" if self.two_level else ""),
        }[self.kind]

    # The fields a kind needs, as non-optional values (``__post_init__`` has checked them).
    @property
    def group(self) -> int:
        """Elements per group along a dim: the ``size`` of a tile, block, mx or nvfp4 granularity."""
        if self.size is None:
            raise ValueError(f"granularity: {self} has no group size")
        return self.size

    @property
    def axis(self) -> int:
        """The ``dim`` an axiswise granularity reduces along."""
        if self.dim is None:
            raise ValueError(f"granularity: {self} reduces along no single dim")
        return self.dim

    @property
    def mode(self) -> MxMode:
        """The ``mx_mode`` of an MX granularity."""
        if self.mx_mode is None:
            raise ValueError(f"granularity: {self} has no MX scale mode")
        return self.mx_mode

    def check_shape(self, shape: torch.Size) -> None:
        """Raise ValueError if a tensor of ``shape`` cannot be scaled at this granularity."""
        nd = len(shape)
        if self.kind == Kind.AXISWISE and not -nd <= self.axis < max(nd, 1):
            raise ValueError(f"dim: {self.dim} is out of range for a tensor of shape {tuple(shape)}")
        if self.kind in (Kind.TILE, Kind.MX, Kind.NVFP4):
            if nd < 1 or shape[-1] % self.group:
                raise ValueError(
                    f"x: {self} scaling needs the last dim to be a multiple of {self.size}, got shape {tuple(shape)}"
                )
        if self.kind == Kind.BLOCK:
            if nd < 2 or shape[-1] % self.group or shape[-2] % self.group:
                raise ValueError(
                    f"x: {self} scaling needs the last two dims to be multiples of {self.size}, "
                    f"got shape {tuple(shape)}"
                )


def tensorwise() -> Granularity:
    return Granularity(Kind.TENSORWISE)


def axiswise(dim: int = -1) -> Granularity:
    """One scale per slice, reducing along ``dim`` (``-1``: one scale per row of a matrix)."""
    return Granularity(Kind.AXISWISE, dim=dim)


def tile(k: int = 128) -> Granularity:
    """1 x k tiles along the last dim (DeepSeek-V3 activations: k = 128)."""
    return Granularity(Kind.TILE, size=k)


def block(k: int = 128) -> Granularity:
    """k x k blocks over the last two dims (DeepSeek-V3 weights: k = 128)."""
    return Granularity(Kind.BLOCK, size=k)


def mx(block_size: int = 32, mode: MxMode | str = MxMode.FLOOR) -> Granularity:
    """OCP MX: 1 x block_size along the last dim, E8M0 scales; mode ``floor``, ``rceil``, ``ceil``
    or ``even`` (module docstring)."""
    # (a string is checked and turned into an MxMode by __post_init__, naming mx_mode)
    return Granularity(Kind.MX, size=block_size, mx_mode=typing.cast(MxMode, mode))


def nvfp4(two_level: bool = True) -> Granularity:
    """NVFP4: 1 x 16 along the last dim, UE4M3 block scales, with a per-tensor scale when
    ``two_level`` (see ``fp8ref.reference.nvfp4``)."""
    return Granularity(Kind.NVFP4, size=16, two_level=two_level)


def _check_tensor(x: object, name: str = "x") -> torch.Tensor:
    return tensor(x, name, floating=True)


def _check_granularity(g: object) -> Granularity:
    return instance(g, Granularity, "granularity", "a Granularity (tensorwise(), axiswise(), tile(), block(), mx())")


def amax(x: torch.Tensor, granularity: Granularity) -> torch.Tensor:
    """max |x| per scaling group, float32 (NaN propagates). Shapes: tensorwise ``()``; axiswise
    ``x`` with ``dim`` kept as 1; tile/mx ``(..., N // k)``; block ``(..., M // k, N // k)``."""
    _check_tensor(x)
    g = _check_granularity(granularity)
    g.check_shape(x.shape)
    a = x.float().abs()
    if g.kind == Kind.TENSORWISE:
        return a.amax() if a.numel() else torch.zeros((), dtype=torch.float32, device=x.device)
    if g.kind == Kind.AXISWISE:
        return a.amax(dim=g.axis, keepdim=True)
    k = g.group
    if g.kind in (Kind.TILE, Kind.MX, Kind.NVFP4):
        return a.reshape(*a.shape[:-1], a.shape[-1] // k, k).amax(dim=-1)
    m, n = a.shape[-2:]
    return a.reshape(*a.shape[:-2], m // k, k, n // k, k).amax(dim=(-3, -1))


def _floor_log2(v: torch.Tensor) -> torch.Tensor:
    """Exact floor(log2(v)) for finite v > 0 (from frexp: v = m * 2^e, m in [0.5, 1))."""
    return torch.frexp(v)[1].to(torch.int32) - 1


def round_down_to_pow2(scale: torch.Tensor) -> torch.Tensor:
    """The largest power of two <= scale, exactly; 0, inf and NaN pass through."""
    _check_tensor(scale, "scale")
    finite_pos = torch.isfinite(scale) & (scale > 0)
    safe = torch.where(finite_pos, scale, torch.ones_like(scale))
    p = torch.ldexp(torch.ones_like(safe), _floor_log2(safe).to(safe.dtype))
    return torch.where(finite_pos, p, scale)


def amax_to_scale(
    amax_: torch.Tensor, fmt: str | FloatFormat, *, pow2: bool = False, eps: float = EPS, margin: int = 0
) -> torch.Tensor:
    """torchao's formula (float64 intermediate, eps clamp), TE's margin, optional pow2 rounding down.
    ``amax`` is an absolute maximum: negative values are refused; NaN and inf give the documented
    NaN and 0 scales (module docstring)."""
    _check_tensor(amax_, "amax")
    if bool((amax_ < 0).any()):
        raise ValueError(f"amax: expected non-negative values (an absolute maximum), got {amax_.min().item()!r}")
    fmt = get_format(fmt)
    boolean(pow2, "pow2")
    positive_number(eps, "eps")
    integer(margin, "margin")
    s = (fmt.max / amax_.to(torch.float64).clamp(min=eps)) / (2.0**margin)
    s = s.to(torch.float32)
    return round_down_to_pow2(s) if pow2 else s


def mx_scale_exponent(amax_: torch.Tensor, fmt: str | FloatFormat, mode: MxMode | str = MxMode.FLOOR) -> torch.Tensor:
    """The unbiased exponent e of the MX block scale X = 2^e (float32; NaN for non-finite amax)."""
    _check_tensor(amax_, "amax")
    fmt = get_format(fmt)
    mode = choice(mode, MxMode, "mode")
    a = amax_.to(torch.float64)
    ok = torch.isfinite(a)
    pos = ok & (a > 0)
    safe = torch.where(pos, a, torch.ones_like(a))
    e = (_floor_log2(safe) - fmt.emax).to(torch.float64)
    if mode == MxMode.RCEIL:
        # ceil(log2(amax / max)) exactly: FLOOR's e, plus one if max * 2^e is still below amax
        e = e + (safe > torch.ldexp(torch.full_like(safe, fmt.max), e)).to(e.dtype)
    elif mode == MxMode.CEIL:
        # ceil(log2(amax)): FLOOR's e, plus one unless amax is a power of two
        e = e + (safe > torch.ldexp(torch.ones_like(safe), _floor_log2(safe).to(safe.dtype))).to(e.dtype)
    elif mode == MxMode.EVEN:
        # amax rounded to man_bits fraction bits (ties away) reaches the next power of two when its
        # significand is at least 2 - 2^-(man_bits + 1)
        p = torch.ldexp(torch.ones_like(safe), _floor_log2(safe).to(safe.dtype))
        e = e + (safe >= p * (2.0 - 2.0 ** -(fmt.man_bits + 1))).to(e.dtype)
    e = torch.where(pos, e, torch.full_like(e, float(E8M0FNU.emin)))  # amax 0 -> the smallest scale
    e = e.clamp(E8M0FNU.emin, E8M0FNU.emax)
    return torch.where(ok, e, torch.full_like(e, float("nan"))).to(torch.float32)


def compute_scale(
    x: torch.Tensor,
    fmt: str | FloatFormat,
    granularity: Granularity | None = None,
    *,
    pow2: bool = False,
    eps: float = EPS,
    margin: int = 0,
) -> torch.Tensor:
    """Current (just-in-time) scaling: the scale for ``x`` itself, shaped like ``amax``.

    For MX the scale is ``2^-e`` (exactly the reciprocal of the E8M0 block scale); ``pow2``,
    ``eps`` and ``margin`` do not apply to MX (its scale is a power of two by definition).
    """
    g = _check_granularity(granularity if granularity is not None else tensorwise())
    if g.kind == Kind.NVFP4:
        raise ValueError("granularity: NVFP4 scales are UE4M3 decode scales; use fp8ref.reference.nvfp4.quantize")
    a = amax(x, g)
    if g.kind == Kind.MX:
        e = mx_scale_exponent(a, fmt, g.mode)
        return torch.where(torch.isnan(e), e, torch.exp2(-e.to(torch.float64)).to(torch.float32))
    return amax_to_scale(a, fmt, pow2=pow2, eps=eps, margin=margin)


def scale_shape(granularity: Granularity, shape: torch.Size) -> torch.Size:
    """The shape of the per-group scales (and amax) of a tensor of ``shape`` at ``granularity``."""
    g = _check_granularity(granularity)
    try:
        shape = torch.Size(shape)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"shape: expected a sequence of ints, got {shape!r}") from exc
    g.check_shape(shape)
    # arithmetic, not amax on a meta tensor: quantize and dequantize ask for it on every call
    if g.kind == Kind.TENSORWISE or not shape:
        return torch.Size(())
    if g.kind == Kind.AXISWISE:
        d = g.axis % len(shape)
        return shape[:d] + torch.Size((1,)) + shape[d + 1 :]
    k = g.group
    if g.kind in (Kind.TILE, Kind.MX, Kind.NVFP4):
        return shape[:-1] + torch.Size((shape[-1] // k,))
    return shape[:-2] + torch.Size((shape[-2] // k, shape[-1] // k))


def expand_scale(scale: torch.Tensor, granularity: Granularity, shape: torch.Size) -> torch.Tensor:
    """Broadcast a per-group scale to the full tensor shape (elementwise multiply ready). The
    scale must have the group shape (``scale_shape``); a tensorwise scale may be any one value."""
    g = _check_granularity(granularity)
    _check_tensor(scale, "scale")
    want = scale_shape(g, shape)  # (checks that ``shape`` can be scaled at ``g``)
    if g.kind == Kind.TENSORWISE and scale.numel() == 1:
        scale = scale.reshape(())
    elif scale.shape != want:
        raise ValueError(
            f"scale: expected shape {tuple(want)} ({g} scaling of shape {tuple(shape)}), got {tuple(scale.shape)}"
        )
    if g.kind in (Kind.TENSORWISE, Kind.AXISWISE):
        return scale.expand(shape)
    if g.kind in (Kind.TILE, Kind.MX, Kind.NVFP4):
        return scale.repeat_interleave(g.group, dim=-1).reshape(shape)
    return scale.repeat_interleave(g.group, dim=-2).repeat_interleave(g.group, dim=-1).reshape(shape)


def to_scale_inv(scale: torch.Tensor) -> torch.Tensor:
    """torchao's scale -> TransformerEngine's scale_inv (what dequantize multiplies by)."""
    _check_tensor(scale, "scale")
    return (1.0 / scale.to(torch.float32)).to(torch.float32)


def from_scale_inv(scale_inv: torch.Tensor) -> torch.Tensor:
    """TransformerEngine's scale_inv -> torchao's scale."""
    _check_tensor(scale_inv, "scale_inv")
    return (1.0 / scale_inv.to(torch.float32)).to(torch.float32)
