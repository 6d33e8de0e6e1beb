"""A team's quantize function held to the current-scaling cast it claims (``CastClaim``).

The function is called as ``fn(x)`` with a float32 matrix and returns ``(codes, scale)``: the
float8 codes (a tensor of the format's float8 dtype, or its uint8 codes) and its scale, one value
(tensorwise) or one per row (rowwise). What it claims, from the definitions in
``fp8ref.reference``: the scale is torchao's (``max / amax`` in float64, amax clamped at
``scaling.EPS``, rounded once to float32) or, with ``convention="scale_inv"``, TransformerEngine's
inverse of it (its float32 reciprocal, what dequantization multiplies by); the codes are
``x * scale`` in float32, clamped to the format's max (saturating) and rounded once to nearest
even, with the function's own scale (so a wrong scale and a wrong rounding are told apart).

Cases, each named in its result: every finite code, values just above, just below and exactly
at each midpoint between neighbouring codes (the cases a cast that rounds twice gets wrong),
tiny and all-zero inputs (the scale's float64 division and its eps clamp), a row of zeros among
others, seeded random draws over six decades, and inputs hypothesis generates (any finite
float32 matrix of 1 to 3 rows: ``examples`` of them; one that differs is made smaller).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ...reference.codec import decode
from ...reference.formats import FloatFormat, get_format
from ...reference.quantize import quantize_with_scale
from ...reference.scaling import Granularity, axiswise, compute_scale, tensorwise
from ...reference.validate import integer, one_of, positive_int
from . import generated
from .results import ClaimResult, known_why, titled

__all__ = ["CastClaim", "check_cast_claim", "CONVENTIONS", "GRANULARITIES"]

CONVENTIONS = ("scale", "scale_inv")
GRANULARITIES = ("tensorwise", "rowwise")
_FORMATS = ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz")
_COLS = 16  # elements per row: 15 of a case and the format's max, so every row's scale is 1


@dataclasses.dataclass(frozen=True)
class CastClaim:
    """A current-scaling cast into ``fmt`` at ``granularity`` (``tensorwise`` or ``rowwise``),
    its scale returned as ``convention`` (``scale``: multiplied on quantize, torchao's;
    ``scale_inv``: its reciprocal, TransformerEngine's)."""

    fmt: str = "e4m3fn"
    granularity: str = "tensorwise"
    convention: str = "scale"

    def __post_init__(self) -> None:
        one_of(self.fmt, _FORMATS, "fmt")
        one_of(self.granularity, GRANULARITIES, "granularity")
        one_of(self.convention, CONVENTIONS, "convention")

    @property
    def name(self) -> str:
        return f"cast {self.fmt} {self.granularity} ({self.convention})"

    def grain(self) -> Granularity:
        return tensorwise() if self.granularity == "tensorwise" else axiswise(-1)


def _positive_values(fmt: FloatFormat) -> torch.Tensor:
    """The format's finite values above zero, ascending, float64."""
    v = decode(torch.arange(256, dtype=torch.uint8), fmt).double()
    return torch.unique(v[torch.isfinite(v) & (v > 0)])


def _rows(values: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """``values`` (each within the format's range) in rows of 15, each row ending in the format's
    max: every row's amax is the max, so its scale is 1 and ``x * scale`` is ``x`` exactly."""
    per = _COLS - 1
    padded = torch.cat([values, values.new_zeros(-len(values) % per)]).reshape(-1, per)
    top = padded.new_full((padded.shape[0], 1), fmt.max)
    return torch.cat([padded, top], dim=1).float()


def _midpoint_cases(fmt: FloatFormat) -> dict[str, torch.Tensor]:
    v = _positive_values(fmt)
    mids = ((v[:-1] + v[1:]) / 2).float()  # (exact in float32: a few bits past the format's)
    above = torch.nextafter(mids, torch.tensor(float("inf")))
    below = torch.nextafter(mids, torch.tensor(0.0))
    signed = lambda t: torch.cat([t, -t]).double()  # noqa: E731 - a one-line helper
    return {
        "just above a midpoint between neighbouring codes (rounds up, once)": _rows(signed(above), fmt),
        "just below a midpoint between neighbouring codes (rounds down)": _rows(signed(below), fmt),
        "exactly at a midpoint (ties to the even code)": _rows(signed(mids), fmt),
    }


def cases(claim: CastClaim, draws: int = 32, seed: int = 0) -> dict[str, torch.Tensor]:
    """The named inputs (float32 matrices of 16 columns)."""
    fmt = get_format(claim.fmt)
    v = _positive_values(fmt)
    gen = torch.Generator().manual_seed(seed)
    random = torch.randn(draws, _COLS, generator=gen) * torch.pow(10.0, torch.rand(draws, 1, generator=gen) * 6 - 3)
    zero_row = random[:4].clone()
    zero_row[1] = 0.0
    return {
        "every finite code, scale 1": _rows(torch.cat([v, -v, torch.zeros(1), -torch.zeros(1)]), fmt),
        **_midpoint_cases(fmt),
        "tiny values (amax 1e-6: a large scale)": torch.linspace(-1e-6, 1e-6, 4 * _COLS).reshape(4, _COLS),
        "all zeros (amax 0: the eps clamp)": torch.zeros(2, _COLS),
        "a row of zeros among others": zero_row,
        f"random draws over six decades (seed {seed})": random,
    }


def _as_codes(codes: Any, fmt: FloatFormat, shape: torch.Size) -> torch.Tensor | str:
    if not isinstance(codes, torch.Tensor):
        return f"codes: expected a tensor, got {type(codes).__name__}"
    if codes.dtype not in (fmt.torch_dtype(), torch.uint8):
        return f"codes: expected {fmt.torch_dtype()} or uint8 codes, got {codes.dtype}"
    if tuple(codes.shape) != tuple(shape):
        return f"codes: expected the input's shape {tuple(shape)}, got {tuple(codes.shape)}"
    return codes.detach().cpu().contiguous().view(torch.uint8)


def _as_scale(scale: Any, claim: CastClaim, rows: int) -> torch.Tensor | str:
    """The function's scale as a float32 column (one value per row), or what is wrong with it."""
    if not isinstance(scale, torch.Tensor) or not scale.is_floating_point():
        return f"scale: expected a float tensor, got {getattr(scale, 'dtype', type(scale).__name__)}"
    want = 1 if claim.granularity == "tensorwise" else rows
    if scale.numel() != want:
        return f"scale: expected {want} value(s) ({claim.granularity}), got shape {tuple(scale.shape)}"
    return scale.detach().cpu().float().reshape(-1, 1).expand(rows, 1)


def _first(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor | None, fmt: FloatFormat | None) -> str:
    """The first element where ``got`` and ``want`` differ, in words."""
    bad = (got != want) & ~(torch.isnan(got) & torch.isnan(want)) if got.is_floating_point() else got != want
    index = tuple(int(i) for i in bad.nonzero()[0])
    count = f"{int(bad.sum())} of {bad.numel()} differ; first at {list(index)}"
    if fmt is None:
        return f"{count}: got {got[index].item()!r}, want {want[index].item()!r}"
    g, w = int(got[index]), int(want[index])
    value = lambda c: decode(torch.tensor([c], dtype=torch.uint8), fmt).item()  # noqa: E731
    assert x is not None
    return f"{count}: x * scale = {x[index].item()!r}: got 0x{g:02x} ({value(g)!r}), want 0x{w:02x} ({value(w)!r})"


def _judge(fn: Callable[[torch.Tensor], Any], claim: CastClaim, x: torch.Tensor) -> str | None:
    fmt = get_format(claim.fmt)
    try:
        out = fn(x.clone())
        codes, scale = out
    except Exception as exc:  # noqa: BLE001 - the team's function's own failure is this case's result
        return f"the function raised {type(exc).__name__}: {exc}"
    got_codes, got_scale = _as_codes(codes, fmt, x.shape), _as_scale(scale, claim, x.shape[0])
    if isinstance(got_codes, str) or isinstance(got_scale, str):
        return got_codes if isinstance(got_codes, str) else str(got_scale)
    want_scale = compute_scale(x, fmt, claim.grain()).reshape(-1, 1).expand(x.shape[0], 1)
    if claim.convention == "scale_inv":
        want_scale = (1.0 / want_scale.double()).float()
    if not torch.equal(got_scale, want_scale):
        return f"its {claim.convention}: " + _first(got_scale, want_scale, None, None)
    multiplier = got_scale if claim.convention == "scale" else (1.0 / got_scale.double()).float()
    want_codes = quantize_with_scale(x, multiplier.reshape(-1, 1), fmt, axiswise(-1)).codes
    if not torch.equal(got_codes, want_codes):
        return "its codes (with its own scale): " + _first(got_codes, want_codes, x * multiplier, fmt)
    return None


def _generated(fn: Callable[[torch.Tensor], Any], claim: CastClaim, examples: int, seed: int) -> str | None:
    """hypothesis's search over finite float32 matrices: the problem (with the shrunk input), or
    None."""
    from hypothesis import strategies as st

    element = generated.float32_values(signed=True)
    matrices = st.integers(1, 3).flatmap(lambda rows: st.lists(element, min_size=rows * _COLS, max_size=rows * _COLS))
    as_x = lambda values: torch.tensor(values, dtype=torch.float32).reshape(-1, _COLS)  # noqa: E731
    found = generated.search(lambda values: _judge(fn, claim, as_x(values)), matrices, examples, seed, _COLS)
    if found is None:
        return None
    values, problem = found
    nonzero = {i: v for i, v in enumerate(values) if v != 0.0}
    shown = ", ".join(f"[{i // _COLS}, {i % _COLS}]: {v!r}" for i, v in list(nonzero.items())[:8])
    more = f" and {len(nonzero) - 8} more" if len(nonzero) > 8 else ""
    rows = len(values) // _COLS
    kept = f"zero but {{{shown}{more}}}" if nonzero else "all zeros"
    return f"{problem}; the input, shrunk: {rows}x{_COLS}, {kept}"


def check_cast_claim(
    fn: Callable[[torch.Tensor], Any],
    claim: CastClaim,
    *,
    known: Mapping[str, str] | None = None,
    draws: int = 32,
    seed: int = 0,
    examples: int = 100,
    label: str | None = None,
) -> list[ClaimResult]:
    """``fn`` on every case (``cases``), each held to ``claim``, then on ``examples`` inputs
    hypothesis generates (0: none); ``known``: the team's known failures (case name -> why,
    ``results.read_known``), reported as such and not failing; ``label``: the function's name in
    the results (``label: claim``), to tell two functions held to one claim apart."""
    if not callable(fn):
        raise TypeError(f"fn: expected the quantize function (x -> (codes, scale)), got {type(fn).__name__}")
    if not isinstance(claim, CastClaim):
        raise TypeError(f"claim: expected a CastClaim, got {type(claim).__name__}")
    positive_int(draws, "draws")
    generated.check_examples(examples)
    integer(seed, "seed")
    name = titled(claim.name, label)
    out = []
    for case, x in cases(claim, draws, seed).items():
        problem = _judge(fn, claim, x)
        out.append(ClaimResult(name, case, problem, known_why(known, name, case) if problem else None))
    if examples:
        out.append(generated.result(name, known, examples, seed, lambda: _generated(fn, claim, examples, seed)))
    return out
