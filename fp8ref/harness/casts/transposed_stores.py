"""Compiled FP8 casts whose outputs are stored transposed, held bit for bit to eager and to
fp8ref's codec, under every way inductor compiles them (``compiled_variants``).

Why: float8 training stores casts transposed all the time: the backward's GEMM takes the
activation and the gradient column-major (``_scaled_mm`` wants its second operand so), so
torchao and its kin cast and write ``x_fp8.t().contiguous()`` or into a column-major buffer in
one fused kernel. Such a kernel is a tiled 1-byte transposed store, and its tiling is what
inductor's autotuner chooses (``compiled_variants``). In mid-2026 a Triton miscompile of exactly
those stores wrote garbage FP8 bytes under some launch configurations: about a quarter of
compiled float8 training runs, the ones whose autotuner picked such a configuration. Eager is
right there, so compiled is compared with eager byte for byte, and both with the codec, so that
eager is not the only judge.

The programs (``PROGRAMS``), each on a bfloat16 input whose values round, tie, saturate, reach
the subnormals and hold signed zeros (``inputs``):

- ``static_t``: ``(x * s).clamp(-448, 448).to(float8_e4m3fn).t().contiguous()``, the static-scale
  cast transposed for the backward.
- ``colmajor_e5m2``: the gradient's cast (E5M2, saturated) written into a column-major buffer
  (``torch.empty_strided(..., (1, rows)).copy_(...)``), the layout ``_scaled_mm`` takes.
- ``dynamic_t``: torchao's tensorwise recipe written out: the scale from the input's amax
  (``max / amax`` in float64, clamped at eps), ``to_fp8_saturated`` (clamp, then cast), the codes
  transposed; the scale is an output too. A reduction and a store in one program, torchao or not.
- ``torchao_t``: torchao's own tensorwise cast (``hp_tensor_to_float8_dynamic``, through
  ``fp8ref.harness.ao.torchao_compat``), its codes transposed for the backward's GEMM. Needs
  torchao (``MissingPackage`` without it).

Shapes (``SHAPES``) that no block size divides: 33x130, 128x96 (a tile size by a non-power of
two), 1x257 (a single row: its transpose is a 1-D kernel), and 257x1031, big enough (over 2^17
elements) for the largest 1-D block inductor tries. ``static_t`` runs on all four, the others on
fewer (``SHAPES_OF``): each shape costs three compiles on the GPU tier, and the class is the
store, which ``static_t`` shows on every shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ...reference.codec import encode
from ...reference.formats import E4M3FN, E5M2, FloatFormat
from ...reference.quantize import quantize
from ...reference.scaling import tensorwise
from . import compiled_variants

__all__ = [
    "Program",
    "PROGRAMS",
    "SHAPES",
    "SHAPES_OF",
    "DRY_RUN_SHAPES",
    "inputs",
    "check_transposed_store",
    "first_difference",
]

SHAPES: tuple[tuple[int, int], ...] = ((33, 130), (128, 96), (1, 257), (257, 1031))
# the dry run's shapes: the smallest that has a tail in both dimensions of the CPU's 32x32 tiles
DRY_RUN_SHAPES: tuple[tuple[int, int], ...] = ((33, 130),)

STATIC_SCALE = 3.0  # not a power of two: the product rounds before the cast does


@dataclasses.dataclass(frozen=True)
class Program:
    """A cast program: ``make()`` gives ``fn(x, scale)`` (what is run eagerly and compiled;
    built when checked, so a program over a package imports it only then; ``fmt``: its float8
    output's format) and what the codec says it returns (``reference(x, scale)``: the same
    outputs, the float8 ones as uint8 codes on the CPU, and the value each code encodes, before
    the cast, in the output's shape, for messages)."""

    name: str
    fmt: FloatFormat
    make: Callable[[], Callable[[torch.Tensor, torch.Tensor], Any]]
    reference: Callable[[torch.Tensor, torch.Tensor], tuple[tuple[torch.Tensor, ...], torch.Tensor]]


def _static_t(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return (x.float() * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).t().contiguous()


def _colmajor_e5m2(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    y = (x.float() * s).clamp(-57344.0, 57344.0).to(torch.float8_e5m2)
    out = torch.empty_strided(y.shape, (1, y.shape[0]), dtype=y.dtype, device=y.device)
    return out.copy_(y)


_EPS = 1e-12  # torchao's amax clamp (fp8ref.reference.scaling.EPS)


def _dynamic_t(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # s unused: the scale comes from x (torchao's tensorwise current scaling)
    amax = x.abs().amax().to(torch.float64)
    scale = (448.0 / amax.clamp(min=_EPS)).to(torch.float32)
    codes = (x.float() * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return codes.t().contiguous(), scale


def _torchao_t() -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    from ..ao import torchao_compat

    cast = torchao_compat.dynamic_cast_fn(E4M3FN, tensorwise(), False)

    def torchao_t(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        codes, scale = cast(x)  # s unused: torchao's scale comes from x
        return codes.t().contiguous(), scale

    return torchao_t


def _ref_static(fmt: FloatFormat, transpose: bool) -> Callable[..., tuple[tuple[torch.Tensor, ...], torch.Tensor]]:
    def ref(x: torch.Tensor, s: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        y = (x.cpu().float() * s.cpu()).clamp(-fmt.max, fmt.max)
        codes = encode(y, fmt, saturate=True)
        return ((codes.t() if transpose else codes),), (y.t() if transpose else y)

    return ref


def _ref_dynamic(x: torch.Tensor, s: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    q = quantize(x.cpu(), E4M3FN, tensorwise())
    y = (x.cpu().float() * q.scale).clamp(-E4M3FN.max, E4M3FN.max)
    return (q.codes.t(), q.scale), y.t()


PROGRAMS: dict[str, Program] = {
    p.name: p
    for p in (
        Program("static_t", E4M3FN, lambda: _static_t, _ref_static(E4M3FN, True)),
        Program("colmajor_e5m2", E5M2, lambda: _colmajor_e5m2, _ref_static(E5M2, False)),
        Program("dynamic_t", E4M3FN, lambda: _dynamic_t, _ref_dynamic),
        Program("torchao_t", E4M3FN, _torchao_t, _ref_dynamic),
    )
}
# the shapes each program runs on the GPU tier (module docstring)
SHAPES_OF: dict[str, tuple[tuple[int, int], ...]] = {
    "static_t": SHAPES,
    "colmajor_e5m2": (SHAPES[0], SHAPES[3]),
    "dynamic_t": (SHAPES[0],),
    "torchao_t": (SHAPES[0], SHAPES[3]),
}


def inputs(shape: tuple[int, int], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The input (bfloat16, ``shape``) and the static scale (a float32 scalar tensor) on ``device``.
    Gaussian values of scale 32 (times the scale 3, some pass E4M3's 448 and all round), every 7th
    large enough to saturate E5M2 too, every 11th tiny (E4M3's subnormals and below), every 13th
    -0.0."""
    rows, cols = shape
    if rows < 1 or cols < 1:
        raise ValueError(f"shape: expected two positive sizes, got {shape}")
    gen = torch.Generator().manual_seed(rows * 100003 + cols)
    x = torch.randn(rows * cols, generator=gen) * 32
    x[::7] = 3e4 * torch.sign(x[::7])
    x[5::11] = x[5::11] * 2.0**-14
    x[3::13] = -0.0
    return x.reshape(rows, cols).to(torch.bfloat16).to(device), torch.tensor(STATIC_SCALE, device=device)


def _outputs(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as their bit patterns (uint8 for float8, int32 for float32), on the CPU."""
    t = t.detach().cpu()
    if t.element_size() == 1:
        return t.view(torch.uint8)
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16)


def _offset(t: torch.Tensor, index: tuple[int, ...]) -> int:
    return int(t.storage_offset()) + sum(i * int(s) for i, s in zip(index, t.stride(), strict=True))


def first_difference(got: torch.Tensor, want_bits: torch.Tensor) -> tuple[int, tuple[int, ...], int] | None:
    """Where ``got``'s bits differ from ``want_bits`` (the same logical shape): the count, and the
    first differing element in memory order (the lowest byte offset of ``got``'s storage, the
    order a store writes): its index and its offset. None when they are equal."""
    diff = _bytes(got) != want_bits
    n = int(diff.sum())
    if n == 0:
        return None
    where = [tuple(int(i) for i in idx) for idx in diff.nonzero()]
    first = min(where, key=lambda idx: _offset(got, idx))
    return n, first, _offset(got, first) * got.element_size()


def _code(bits: torch.Tensor, index: tuple[int, ...]) -> str:
    v = int(bits[index]) & (0xFF if bits.element_size() == 1 else 0xFFFFFFFF)
    return f"0x{v:02x}" if bits.element_size() == 1 else f"0x{v:08x}"


def _compare(
    label: str,
    what: str,
    got: tuple[torch.Tensor, ...],
    eager: tuple[torch.Tensor, ...],
    ref: tuple[torch.Tensor, ...],
    before: torch.Tensor,
) -> str | None:
    if len(got) != len(eager):
        return f"{label}: {len(got)} outputs where eager returns {len(eager)}"
    for k, (g, e, r) in enumerate(zip(got, eager, ref, strict=True)):
        name = f"output {k}" if len(got) > 1 else "output"
        if g.shape != e.shape or g.dtype != e.dtype:
            return f"{label}: {name} is {g.dtype} {tuple(g.shape)}, eager's {e.dtype} {tuple(e.shape)}"
        if g.stride() != e.stride():
            return (
                f"{label}: {name} stored with strides {g.stride()}, eager's {e.stride()} "
                "(the GEMM that reads it expects eager's layout)"
            )
        e_bits = _bytes(e)
        found = first_difference(g, e_bits)
        if found is None:
            continue
        n, idx, offset = found
        g_bits = _bytes(g)
        value = f", the value cast {float(before[idx])!r}" if g.element_size() == 1 and before.shape == g.shape else ""
        return (
            f"{label}: {what} {name} ({g.dtype}, strides {g.stride()}) differs from eager in {n} of "
            f"{g.numel()} elements; first differing byte {offset} (element {list(idx)}): compiled "
            f"{_code(g_bits, idx)}, eager {_code(e_bits, idx)}, the codec {_code(r, idx)}{value}"
        )
    return None


def check_transposed_store(
    program: str | Program,
    shape: tuple[int, int],
    device: str,
    *,
    only: tuple[str, ...] | None = None,
) -> str | None:
    """Compile ``program`` (a name in ``PROGRAMS``) each way ``compiled_variants.variants(device)``
    lists (``only``: those labels alone), run it on ``inputs(shape, device)`` and hold every
    output to eager's, byte for byte and stride for stride, after holding eager to the codec.
    None when all agree; else one line per run that differs, each naming the run (the mode, or
    each kernel's forced configuration), the program, the shape and the first differing byte."""
    p = PROGRAMS.get(program) if isinstance(program, str) else program
    if not isinstance(p, Program):
        raise ValueError(f"program: expected one of {sorted(PROGRAMS)}, got {program!r}")
    compiled_variants.variants(device)  # a device it cannot compile for is refused before any work
    x, s = inputs(shape, device)
    what = f"{p.name} on {tuple(shape)} ({device}, torch {torch.__version__}):"
    fn = p.make()
    eager = tuple(o.detach().clone(memory_format=torch.preserve_format) for o in _outputs(fn(x, s)))
    ref, before = p.reference(x, s)
    # eager first, against the codec: a wrong eager cast is the install's, not the compiler's
    for k, (e, r) in enumerate(zip(eager, ref, strict=True)):
        if e.shape != r.shape or not torch.equal(_bytes(e), _bytes(r)):
            return (
                f"eager {what} output {k} is not the codec's (the install's cast, not a compiled "
                "store: see the cast conformance tests)"
            )
    ref_bits = tuple(_bytes(r) for r in ref)
    problems = []
    for label, out in compiled_variants.each_compiled_run(fn, (x, s), device, only=only):
        problem = _compare(f"compiled {label}", what, _outputs(out), eager, ref_bits, before)
        if problem is not None:
            problems.append(problem)
    return "\n".join(problems) if problems else None
