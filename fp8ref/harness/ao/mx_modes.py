"""MX block scaling in every scale mode and block size, at the amax values that decide each mode.

Each mode turns a block's amax into an E8M0 exponent by a different rounding (fp8ref.reference.
scaling's docstring has the four formulas). A random tensor almost never puts an amax where two
modes part, so the inputs here are built around the boundaries: amax an exact power of two and
one float32 ulp either side (FLOOR and CEIL part there), max_elem x 2^k and its neighbours
(RCEIL), and the tie of EVEN's rounding of amax to the element's significand with its
neighbours. Every other element of a block is drawn below its amax, so the element codes are
checked too. Shared by tests/cpu/install/test_mx_modes.py and tests/meta.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import torch

from ...reference.codec import decode, pack_fp4
from ...reference.formats import E8M0FNU, FloatFormat
from ...reference.quantize import quantize, quantize_with_scale
from ...reference.scaling import amax, mx
from ..casts.deviations import explain_mx_scales
from ..stack.refusals import attempt

MODES = ("floor", "rceil", "ceil", "even")
# powers of two from one element per scale to eight times the OCP block, and one that is not
BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 24)
# block exponents far from E8M0's ends, where torchao clamps its float32 divisor to 2^-126
EXPONENTS = (-60, -7, 0, 3, 40)

ToMx = Callable[[torch.Tensor, FloatFormat, int, str], tuple[torch.Tensor, torch.Tensor]]


def _ulp_neighbours(v: float) -> list[float]:
    """``v`` (a float32) and its float32 neighbours."""
    t = torch.tensor([v], dtype=torch.float32)
    return [float(torch.nextafter(t, t.new_full((1,), d))) for d in (0.0, v, math.inf)]


def boundary_amaxes(fmt: FloatFormat) -> list[float]:
    """The float32 amax values where FLOOR, CEIL, RCEIL and EVEN decide differently for ``fmt``."""
    even_tie = 2.0 - 2.0 ** -(fmt.man_bits + 1)
    out: list[float] = []
    for k in EXPONENTS:
        for base in (1.0, fmt.max / 2.0**fmt.emax, even_tie):
            out += _ulp_neighbours(base * 2.0**k)
    return sorted(set(out))


def boundary_blocks(fmt: FloatFormat, block_size: int, seed: int = 0) -> torch.Tensor:
    """float32 rows of two blocks each; every boundary amax is the amax of one block (at a drawn
    position and sign), the block's other elements drawn below it."""
    amaxes = boundary_amaxes(fmt)
    n = len(amaxes)
    gen = torch.Generator().manual_seed(seed)
    a = torch.tensor(amaxes, dtype=torch.float32)
    second = a.roll(1)
    per_block = torch.stack([a, second], dim=1)  # (n, 2)
    body = torch.rand(n, 2, block_size, generator=gen) * 0.99 * per_block[..., None]
    body = torch.where(torch.rand(n, 2, block_size, generator=gen) < 0.5, -body, body)
    where = torch.randint(0, block_size, (n, 2, 1), generator=gen)
    sign = torch.where(torch.rand(n, 2, 1, generator=gen) < 0.5, -1.0, 1.0)
    body.scatter_(2, where, sign * per_block[..., None])
    return body.reshape(n, 2 * block_size)


def as_held(codes: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Element codes the way torchao's MX data holds them: FP4 two per byte, others one."""
    return pack_fp4(codes) if fmt.bits == 4 else codes


class MxModeResult(NamedTuple):
    problem: str | None  # None, or a line naming the first block that differs
    refused: str | None  # the install's refusal of this mode or block size, if any
    deviations: dict[str, int]  # blocks a known MX scale deviation explains, by key


def check_mx_mode(to_mx: ToMx, fmt: FloatFormat, mode: str, block_size: int) -> MxModeResult:
    """``to_mx(x, fmt, block_size, mode)`` (E8M0 scale codes, element bytes as torchao holds them)
    against fp8ref on the boundary blocks. A block whose scale a known deviation explains
    (fp8ref.harness.casts.deviations, MX_SCALE_DEVIATIONS) is counted, and its elements are checked
    against the reference cast under the scale the implementation chose. Whether the install takes
    this mode and block size is asked first, on two blocks of ones (``mode_refusal``); the boundary
    blocks then run unguarded."""
    refused = mode_refusal(to_mx, fmt, mode, block_size)
    if refused is not None:
        return MxModeResult(None, refused, {})
    x = boundary_blocks(fmt, block_size)
    scale, data = to_mx(x, fmt, block_size, mode)
    g = mx(block_size, mode)
    q = quantize(x, fmt, g)
    want_scale = q.scale_e8m0
    where = f"mx {fmt.name} {mode} block {block_size}"
    if scale.numel() != want_scale.numel():
        return MxModeResult(f"{where}: {scale.numel()} scales, the definition {want_scale.numel()}", None, {})
    scale = scale.reshape(want_scale.shape)
    problem, counts = scale_problem(where, mode, fmt, amax(x, g), scale, want_scale)
    if problem is not None:
        return MxModeResult(problem, None, counts)
    # the elements, under the scale each block was given (the definition's, or an excused one)
    scale_inv = decode(scale, E8M0FNU).to(torch.float32)
    want_data = as_held(quantize_with_scale(x, 1.0 / scale_inv, fmt, g).codes, fmt)
    data = data.reshape(want_data.shape)
    if not torch.equal(data, want_data):
        i = int((data != want_data).reshape(-1).nonzero()[0])
        return MxModeResult(
            f"{where}: element byte {i} is 0x{int(data.reshape(-1)[i]):02x}, the definition "
            f"0x{int(want_data.reshape(-1)[i]):02x} ({int((data != want_data).sum())} differ)",
            None,
            counts,
        )
    return MxModeResult(None, None, counts)


def scale_problem(
    where: str, mode: str, fmt: FloatFormat, block_amax: torch.Tensor, theirs: torch.Tensor, ours: torch.Tensor
) -> tuple[str | None, dict[str, int]]:
    """E8M0 block scales ``theirs`` against the definition's ``ours`` (same shape): a line naming
    the first block that differs, after the blocks a named MX scale deviation explains
    (``explain_mx_scales``) are excused, or None; and the excused blocks per deviation."""
    bad = theirs != ours
    excused, counts = explain_mx_scales(mode, fmt, block_amax, theirs, bad)
    bad &= ~excused
    if not bool(bad.any()):
        return None, counts
    i = int(bad.reshape(-1).nonzero()[0])
    a = float(block_amax.reshape(-1)[i])
    return (
        f"{where}: amax {a!r} ({a.hex()}) gets scale 0x{int(theirs.reshape(-1)[i]):02x}, the definition "
        f"0x{int(ours.reshape(-1)[i]):02x} ({int(bad.sum())} of {bad.numel()} blocks differ)",
        counts,
    )


def mode_refusal(to_mx: ToMx, fmt: FloatFormat, mode: str, block_size: int) -> str | None:
    """None when ``to_mx`` takes ``mode`` and ``block_size`` (the smallest call that asks: two
    blocks of ones, so FP4 packs its pairs), else the install's refusal."""
    ok, got = attempt(lambda: to_mx(torch.ones(1, 2 * block_size), fmt, block_size, mode))
    return None if ok else str(got)


def every_block_size_problem(
    to_mx: ToMx,
    fmt: FloatFormat,
    mode: str,
    what: str,
    record_observation: Callable[[str, str], None],
    record_defect: Callable[[str, str, int], None] | None = None,
) -> str | None:
    """``check_mx_mode`` at every block size of ``BLOCK_SIZES``: refusals and excused deviations
    recorded (``what`` names the implementation; an excused deviation also as a defect of the
    install). None when at least one block size is accepted and none has a problem, else what
    went wrong."""
    problems, refused, excused = [], [], Counter[str]()
    for block_size in BLOCK_SIZES:
        r = check_mx_mode(to_mx, fmt, mode, block_size)
        if r.refused:
            refused.append(f"{block_size}: {r.refused}")
        if r.problem:
            problems.append(r.problem)
        excused.update(r.deviations)
    if refused:
        record_observation(f"{what} mx {fmt.name} {mode}: refused block sizes", "; ".join(refused))
    for key, n in excused.items():
        record_observation(f"{what} mx {fmt.name} {mode}: known deviation {key}", f"{n} boundary blocks")
        if record_defect is not None:
            record_defect(key, f"{what} mx {fmt.name} {mode}", n)
    if len(refused) == len(BLOCK_SIZES):
        return f"{what} refuses every block size in {mode}: {refused[0]}"
    return "\n".join(problems) if problems else None


def partial_block_answer(to_mx: ToMx, fmt: FloatFormat) -> str:
    """What ``to_mx`` does with a row that ends inside a block (48 elements, blocks of 32): the
    reference refuses it (no silent padding); an implementation's answer is recorded."""
    x = torch.ones(2, 48)
    ok, got = attempt(lambda: to_mx(x, fmt, 32, "floor"))
    if not ok:
        assert isinstance(got, str)
        return got
    assert not isinstance(got, str)
    return f"accepted: scales {tuple(got[0].shape)}, data {tuple(got[1].shape)}"
