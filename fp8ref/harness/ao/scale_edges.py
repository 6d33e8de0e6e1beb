"""torchao's scales at the edges where a float32 ``log2`` decides them, against the definition:
the power-of-two rounding of float8 scales (the largest power of two <= the scale), and MX block
scales at amax values one ulp either side of a power of two (FLOOR) or of max_elem x 2^k (RCEIL).
A known deviation (fp8ref/harness/casts/deviations.py: ``POW2_SCALE_DEVIATIONS``,
``MX_SCALE_DEVIATIONS``) is excused for exactly its inputs and its answer, and counted; any other
answer fails. Each check returns ``(problem, known_deviations)``: a line naming the first input whose
answer is neither (None when there is none), and the count per known deviation key. Shared by
tests/cpu/install/test_torchao_scales.py, tests/cpu/install/test_mx_linear.py and tests/meta.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...reference.formats import E4M3FN, FloatFormat
from ...reference.quantize import quantize
from ...reference.scaling import amax, compute_scale, mx, round_down_to_pow2, tensorwise
from ..casts.deviations import explain_pow2_scales
from .mx_modes import scale_problem

ProblemAndDeviations = tuple[str | None, dict[str, int]]
ToMx = Callable[[torch.Tensor, FloatFormat, int, str], tuple[torch.Tensor, torch.Tensor]]


def pow2_edge_scales() -> torch.Tensor:
    """float32 scales 2^k for k = -60..60, one ulp below and above each, and 1.5 x 2^k (where
    rounding up or to the nearest power of two parts from rounding down)."""
    p = torch.exp2(torch.arange(-60.0, 61.0))
    below, above = torch.nextafter(p, torch.zeros_like(p)), torch.nextafter(p, torch.full_like(p, 2.0**61))
    return torch.cat([p, below, above, 1.5 * p])


def _pow2_problem(scale: torch.Tensor, got: torch.Tensor, what: str) -> ProblemAndDeviations:
    want = round_down_to_pow2(scale)  # exact, from the float's exponent bits
    got = got.float().reshape(want.shape)
    bad = got != want
    excused, counts = explain_pow2_scales(scale, got, bad)
    bad &= ~excused
    if bool(bad.any()):
        i = int(bad.reshape(-1).nonzero()[0])
        s, g, w = (float(t.reshape(-1)[i]) for t in (scale, got, want))
        return f"{what} of {s!r} ({s.hex()}): {g!r}, the definition {w!r} ({int(bad.sum())} differ)", counts
    return None, counts


def check_pow2_round_down(round_down: Callable[[torch.Tensor], torch.Tensor]) -> ProblemAndDeviations:
    """``round_down(scales)`` (a float32 scale to a power of two, as torchao's
    ``_round_scale_down_to_power_of_2``) on ``pow2_edge_scales``."""
    scale = pow2_edge_scales()
    return _pow2_problem(scale, round_down(scale.clone()), "pow2 rounding")


def check_pow2_scale(tensor_to_scale: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> ProblemAndDeviations:
    """``tensor_to_scale(x)``, the tensorwise E4M3 scale of ``x`` rounded to a power of two (as
    torchao's ``tensor_to_scale(..., round_scales_to_power_of_2=True)``): the definition's
    round-down of float32(448 / amax), or a deviation's answer for that scale."""
    return _pow2_problem(
        compute_scale(x, E4M3FN, tensorwise()), tensor_to_scale(x), f"pow2 scale (amax {float(x.abs().max())!r})"
    )


def mx_boundary_blocks(dtype: torch.dtype, mode: str) -> torch.Tensor:
    """Blocks of 32 whose amax is 2^k (FLOOR) or 448 x 2^k (RCEIL), k = -20..20, or one ulp of
    ``dtype`` below or above it, the other elements below it: where an amax taken through a
    narrower dtype, or a float32 log2, moves the E8M0 exponent."""
    k = torch.arange(-20, 21, dtype=torch.float32)
    base = torch.exp2(k) * (1.0 if mode == "floor" else E4M3FN.max)
    held = base.to(dtype)
    edges = torch.cat(
        [base, torch.nextafter(held, torch.zeros_like(held)).float(), torch.nextafter(held, held * 2).float()]
    )
    x = torch.full((edges.numel(), 32), 0.5, dtype=torch.float32) * edges[:, None].abs() / 4
    x[:, 7] = edges
    x = x.to(dtype)
    assert torch.equal(x[:, 7].float(), edges)  # each edge exact in the block's dtype
    return x


def check_mx_boundary_scales(to_mx: ToMx, dtype: torch.dtype, mode: str) -> ProblemAndDeviations:
    """``to_mx``'s E8M0 scales (E4M3 elements, blocks of 32) of ``mx_boundary_blocks``: bitwise
    the definition's, or a named MX scale deviation's exact answer."""
    x = mx_boundary_blocks(dtype, mode)
    theirs = to_mx(x, E4M3FN, 32, mode)[0]
    ours = quantize(x, E4M3FN, mx(32, mode)).scale_e8m0
    return scale_problem(f"mx {mode} {dtype}", mode, E4M3FN, amax(x, mx(32, mode)), theirs.reshape(ours.shape), ours)


def known_deviation_words(counts: dict[str, int], of: int) -> str:
    """An observation's words for what was excused: ``'<key> on n of N'``, or the definition's."""
    return "; ".join(f"named deviation {k} on {n} of {of}" for k, n in sorted(counts.items())) or "the definition"
