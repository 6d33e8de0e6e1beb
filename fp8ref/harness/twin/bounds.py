"""The bounds a module check holds an FP8 GEMM to, derived from the recipe the module declares
(docs/twin.md, "The bounds", writes the derivation out).

One operand ``a`` cast into a format with ``m`` mantissa bits under a scale ``s`` (the value the
cast multiplies by) errs elementwise by at most

- ``u |a| + eta``, ``u = 2^-(m+1)`` (one rounding to nearest), ``eta = 2^-(bias+m) / s`` (half the
  smallest subnormal step, where the relative bound stops holding), while ``|a| s <= max``;
- ``|a| - max / s`` where ``|a| s > max`` (a saturating cast clamps; a scale that lags the
  tensor's growth, as delayed scaling's does, clamps its largest elements).

A GEMM ``C = A B`` of two such operands then errs elementwise by at most
``E_A |B| + |A| E_B + E_A E_B`` (per term ``|a^ b^ - a b| <= e_a |b| + |a| e_b + e_a e_b``, which is
``((1+u_a)(1+u_b) - 1) |a||b|`` in the normal range, summed over K) plus what
``gemm_probes.reference_bound`` allows the kernel: its accumulator's roundings over K and the
output's rounding, taken on the magnitudes ``|A| + E_A`` and ``|B| + E_B`` (at least the
quantized operands'). The check reports the largest ratio of the measured error to this
elementwise bound (the max norm of the error relative to the bound)."""

from __future__ import annotations

import dataclasses

import torch

from ...reference.delayed import DelayedScaling
from ...reference.formats import FloatFormat, get_format
from ...reference.validate import one_of
from ..gemm.gemm_probes import reference_bound

__all__ = ["Scaling", "Operand", "operand_error", "gemm_bound", "ratio", "unit"]


def unit(fmt: FloatFormat) -> float:
    """``u = 2^-(m+1)``: the relative error of one rounding to nearest in ``fmt``'s normal range."""
    return 2.0 ** -(fmt.man_bits + 1)


@dataclasses.dataclass(frozen=True)
class Scaling:
    """How a tensor's scale is chosen: ``dynamic`` (from its own amax now: tensorwise, rowwise or
    any finer granularity, bounded alike, module docstring), ``static`` (``scale``, the value the
    cast multiplies by) or ``delayed`` (TransformerEngine's amax history of ``history_len`` steps
    with ``margin``, ``fp8ref.reference.delayed.DelayedScaling``, replayed by the check on the
    amaxes the module saw). ``pow2``: a dynamic scale rounded down to a power of two (torchao's
    ``round_scales_to_power_of_2``, its rowwise recipe's): the scale is then at least half of
    ``max / amax``, and the subnormal term doubles."""

    kind: str = "dynamic"
    scale: float | None = None
    history_len: int = 16
    margin: int = 0
    pow2: bool = False

    def __post_init__(self) -> None:
        one_of(self.kind, ("dynamic", "static", "delayed"), "kind")
        if (self.kind == "static") != (self.scale is not None):
            raise ValueError(f"scale: a static Scaling takes its scale (and only it does), got {self.scale!r}")
        if self.scale is not None and not (isinstance(self.scale, (int, float)) and self.scale > 0):
            raise ValueError(f"scale: expected a positive number, got {self.scale!r}")


@dataclasses.dataclass(frozen=True)
class Operand:
    """One role's cast: its format (``e4m3fn``, ``e5m2``, ...) and its ``Scaling``."""

    fmt: str = "e4m3fn"
    scaling: Scaling = Scaling()

    def __post_init__(self) -> None:
        one_of(self.fmt, ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"), "fmt")
        if not isinstance(self.scaling, Scaling):
            raise TypeError(f"scaling: expected a Scaling, got {self.scaling!r}")

    def history(self) -> DelayedScaling | None:
        """A fresh replay of a delayed scale (None for the other kinds)."""
        if self.scaling.kind != "delayed":
            return None
        return DelayedScaling(self.fmt, history_len=self.scaling.history_len, margin=self.scaling.margin)


def _scale(op: Operand, a: torch.Tensor, replay: DelayedScaling | None) -> float:
    fmt = get_format(op.fmt)
    if op.scaling.kind == "static":
        return float(op.scaling.scale)  # type: ignore[arg-type]
    if op.scaling.kind == "delayed":
        assert replay is not None
        return float(replay.scale)
    amax = float(a.abs().max()) if a.numel() else 0.0
    # dynamic: max / amax of the whole tensor, the smallest scale any granularity's groups get
    # (a finer group has an amax no larger), so eta below holds for each; amax 0: nothing to err
    if amax <= 0:
        return float("inf")
    return fmt.max / amax / (2.0 if op.scaling.pow2 else 1.0)


def operand_error(op: Operand, a: torch.Tensor, replay: DelayedScaling | None = None) -> torch.Tensor:
    """The elementwise bound on ``|cast(a) - a|`` (float64), module docstring. ``replay``: the
    delayed scale's replay, read (not updated) here."""
    fmt = get_format(op.fmt)
    mag = a.detach().double().abs()
    s = _scale(op, a, replay)
    if s == float("inf"):
        return torch.zeros_like(mag)
    eta = 2.0 ** -(fmt.bias + fmt.man_bits) / s
    within = unit(fmt) * mag + eta
    return torch.where(mag * s > fmt.max, mag - fmt.max / s, within)


def gemm_bound(
    a: torch.Tensor, e_a: torch.Tensor, b: torch.Tensor, e_b: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    """The elementwise bound on ``|C^ - A B|`` for operands ``a`` (M, K), ``b`` (K, N) (their exact
    values) cast within ``e_a``, ``e_b`` (module docstring)."""
    ma, mb = a.detach().double().abs(), b.detach().double().abs()
    one = torch.ones((), dtype=torch.float64)
    kernel = reference_bound(ma + e_a, mb + e_b, one, one, out_dtype)[1]
    return e_a @ mb + ma @ e_b + e_a @ e_b + kernel


def ratio(got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor) -> tuple[float, float, float]:
    """The largest ``|got - want| / bound`` (inf where a non-finite value or an error beyond a zero
    bound), with that element's error and bound."""
    err = (got.detach().double() - want.detach().double()).abs()
    err = torch.where(torch.isfinite(err), err, torch.full_like(err, float("inf")))
    if err.numel() == 0:
        return 0.0, 0.0, 0.0
    r = torch.where(err > 0, err / bound.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(err))
    r = torch.where(err > 0, torch.where(bound > 0, r, torch.full_like(r, float("inf"))), r)
    i = int(r.flatten().argmax())
    return float(r.flatten()[i]), float(err.flatten()[i]), float(bound.flatten()[i])
