"""One traced call of an op that reads or writes a float8 dtype, held to the definition by its
kind, on the spot (``check_call``):

- ``movement`` (view, cat, copy_ within a dtype, transpose, clone, index, ...): each output byte
  is the input byte the op's position tags name (``judge.movement``), bit for bit;
- ``cast`` (``_to_copy`` and ``copy_`` into float8 from another dtype): each code is the codec's
  (``reference.codec.encode``, round to nearest even) for the input's exact value; a float64 or
  integer source is rounded once by the definition, or through float32 (which one, observed);
- ``values`` (arithmetic, comparisons, decodes to wider dtypes) and ``converts`` (to an integer
  dtype, where the value is finite and in range): the op on the decoded inputs in float64, the
  exact result rounded once into the output's dtype;
- ``written`` (fill_, zero_, full, masked_fill, ...): the value the op computes in float64, cast
  as a ``cast`` is judged;
- ``scaled_mm`` (``torch._scaled_mm`` with tensorwise or rowwise scales): the float64 product of
  the decoded operands times their scales, within ``gemm_probes.reference_bound``;
- anything else is ``unchecked``, with why.

Out of range, a float8 answer may saturate or not (implementation-defined: the behaviour profile
pins which): either is accepted there and only there, and which one came is recorded. Which kind
an op is comes from ``native.native_op_kinds`` (the table the native op suite holds every op to),
the comparisons and the known deviations from ``native.native_checks`` and ``casts.deviations``.
Every float8 tensor's codes are read from its storage (``judge.stored``), never through the
install's copy kernels.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ...reference.codec import decode, encode
from ...reference.definition import round_by_definition
from ...reference.formats import FloatFormat, select
from ..gemm.documented_accumulator import within_bits
from ..gemm.gemm_probes import reference_bound
from ..judge.casts import Reading, cast_readings, excused_cast_deviations, rounded, unsigned_answer, unsigned_ok
from ..judge.movement import judge_movement, unravel
from ..judge.stored import stored_codes, values_of
from ..native.native_checks import OpCheck, _known_deviation_elements, _same_numbers
from ..native.native_op_kinds import SAMPLE_KIND, UNCHECKED, kind_of
from ..stack.refusals import first_words, survey
from .records import Difference

__all__ = ["FLOAT8", "SCALED_GEMMS", "Verdict", "check_call", "is_float8", "touches_float8", "named_args"]

# torch dtype -> its format, for the one-byte float8 dtypes this torch has
FLOAT8: dict[torch.dtype, FloatFormat] = {
    dtype: f for f in select(has_torch_dtype=True, bits=8) if (dtype := f.torch_dtype()) is not None
}

SCALED_GEMMS = ("_scaled_mm", "_scaled_grouped_mm", "_scaled_mm_v2", "_scaled_grouped_mm_v2")

# conversions: which check depends on the source's and the output's dtypes
# (``to`` reaches a dispatch mode only below autograd, inside a custom op's body: a cast there too)
_CONVERSIONS = ("_to_copy", "copy_", "copy", "to")

# aten ops the op catalogue names otherwise (it lists Python functions, not their aten forms):
# each only moves, aliases or gathers codes
_ATEN_MOVEMENT = frozenset(
    "detach alias _unsafe_view lift_fresh lift_fresh_copy _reshape_alias _reshape_copy index _unsafe_index "
    "embedding".split()  # (the catalogue's nn.functional.embedding: rows of codes looked up by index)
)

_WHAT = {
    "movement": "the input bytes its position tags name",
    "cast": "the codec's encoding of the input (round to nearest even)",
    "values": "the exact result rounded once",
    "converts": "the exact result converted",
    "written": "the written value rounded as a cast",
    "scaled_mm": "the exact scaled product within the derived bound",
}


@dataclasses.dataclass
class Verdict:
    kind: str
    status: str = "ok"  # ok, violation, unchecked
    reason: str = ""
    problem: str = ""
    difference: Difference | None = None
    observed: dict[str, str] = dataclasses.field(default_factory=dict)
    known_deviations: dict[str, int] = dataclasses.field(default_factory=dict)


def is_float8(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.dtype in FLOAT8


def touches_float8(tree: Any) -> bool:
    """Whether any leaf of ``tree`` is a float8 tensor or a float8 dtype argument."""
    return any(is_float8(v) or (isinstance(v, torch.dtype) and v in FLOAT8) for v in tree_flatten(tree)[0])


def named_args(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by their names in the op's schema."""
    return {**{a.name: v for a, v in zip(func._schema.arguments, args)}, **kwargs}


def _tensors(tree: Any) -> list[Any]:
    return [v for v in tree_flatten(tree)[0] if isinstance(v, torch.Tensor)]


def _code_text(code: int, fmt: FloatFormat) -> str:
    return f"0x{code:02x} ({decode(torch.tensor([code], dtype=torch.uint8), fmt).item()!r})"


def _codes(t: torch.Tensor) -> torch.Tensor:
    """A float8 tensor's codes in logical order (int64, on the CPU), read from its storage by
    index arithmetic (``judge.stored``): no kernel of the install runs on the codes it judges."""
    return stored_codes(t)


def _decoded(t: torch.Tensor) -> torch.Tensor:
    return values_of(_codes(t), FLOAT8[t.dtype])


# --- the kind of a call -------------------------------------------------------------------------------
def _reinterpreted(name: str, args: tuple, kwargs: dict, out: Any) -> tuple[str, str]:
    """A movement whose float8 output holds the bytes of a tensor that is not float8 (``view`` of
    uint8 codes, or of E8M0 scales computed as integers, as float8): the codes were made outside
    float8, by arithmetic no check here can judge; the same view on the uint8 view would compare
    them with themselves."""
    ins = {t.dtype for t in _tensors((args, kwargs))}
    made = sorted(str(d).removeprefix("torch.") for d in ins if d not in FLOAT8)
    if made and any(is_float8(t) for t in _tensors(out)) and not any(d in FLOAT8 for d in ins):
        return "unchecked", f"float8 codes made outside float8 (the bytes of a {made[0]} tensor reinterpreted)"
    outs = _tensors(out)
    if outs and not any(is_float8(t) for t in outs):  # (x.view(torch.uint8): the codes leave float8 as they are)
        into = sorted({str(t.dtype).removeprefix("torch.") for t in outs})
        return "unchecked", f"float8 bytes reinterpreted as {', '.join(into)}: no float8 output to judge"
    return "movement", name


def classify(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[str, str]:
    """``(kind, name)``: the check the call is held to and the op's name in the kinds table, or
    ``("unchecked", why)``."""
    packet = func.overloadpacket.__name__
    if func.namespace not in ("aten", "prims"):  # (its name may match an aten op's; its meaning need not)
        return "unchecked", f"{func.namespace}::{packet}: an op of its own library, not aten's, and not seen through"
    if packet in SCALED_GEMMS:
        if packet == "_scaled_mm":
            return "scaled_mm", packet
        return "unchecked", f"{packet}: not held to a bound by the tracer yet (the scaled GEMM it checks is _scaled_mm)"
    if packet in _CONVERSIONS:
        named = named_args(func, args, kwargs)
        src = named.get("src", named.get("self"))
        outs = _tensors(out)
        if not isinstance(src, torch.Tensor) or len(outs) != 1:
            return "unchecked", f"{packet} without one source tensor and one output"
        dst = outs[0]
        if src.is_complex() or dst.is_complex():
            return "unchecked", "a complex source or output"
        if src.dtype == dst.dtype:
            return "movement", packet
        if dst.dtype in FLOAT8:
            return "cast", packet
        if dst.is_floating_point() or dst.dtype == torch.bool:
            return "values", packet
        return "converts", packet
    if packet == "pad":  # (aten.pad: a constant pad writes its value, the other modes move codes)
        mode = named_args(func, args, kwargs).get("mode", "constant")
        return ("written", "constant_pad_nd") if mode == "constant" else _reinterpreted(packet, args, kwargs, out)
    names = [packet] + ([packet[:-1]] if packet.endswith("_") and not packet.endswith("__") else [])
    for name in names:
        kind = kind_of(name)
        if kind == "unchecked":
            return kind, UNCHECKED[name]
        if kind is not None:
            if name in SAMPLE_KIND:  # (a kind that depends on the arguments: index_put's accumulate)
                call = types.SimpleNamespace(ways={"float8": (args[0], tuple(args[1:]), kwargs)})
                kind = SAMPLE_KIND[name](call, kind)
                if kind == "unchecked":
                    return kind, f"{name} on these arguments is a reduction (native_op_kinds.SAMPLE_KIND)"
            return _reinterpreted(name, args, kwargs, out) if kind == "movement" else (kind, name)
    if packet in _ATEN_MOVEMENT:
        return _reinterpreted(packet, args, kwargs, out)
    return "unchecked", f"{packet}: no kind in fp8ref's op table (fp8ref/harness/native/native_op_kinds.py)"


# --- judging a float8 output --------------------------------------------------------------------------
def _judge_float8(
    got: torch.Tensor,
    readings: list[Reading],
    fmt: FloatFormat,
    j: int,
    verdict: Verdict,
    check: OpCheck,
    codes_in: list[torch.Tensor],
    known_deviation: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> None:
    """``got`` (float8) against the readings; the first rejected element goes to ``verdict``.
    ``codes_in``: the float8 inputs' codes, for the op's named deviations."""
    codes = _codes(got)
    got_v = values_of(codes, fmt)
    if got_v.shape != readings[0].want.shape:
        verdict.status = "violation"
        verdict.problem = f"output {j}: shape {tuple(got.shape)}, want {tuple(readings[0].want.shape)}"
        return
    plain = [_same_numbers(got_v, r.want, None) for r in readings]
    sat = [r.out_of_range & _same_numbers(got_v, r.saturated, None) for r in readings]
    ok = torch.zeros_like(plain[0])
    for p, s, r in zip(plain, sat, readings):
        ok |= p | s | unsigned_ok(got_v, r)
    if (came := unsigned_answer(got_v, readings[0])) is not None:  # (no code by the definition: observed)
        verdict.observed[f"output {j} no {fmt.name} code (zero or negative)"] = came
    oor = readings[0].out_of_range
    for r in readings[1:]:
        oor = oor | r.out_of_range
    if bool(oor.any()):
        some_plain = torch.zeros_like(ok)
        for p in plain:
            some_plain |= p
        some_sat = torch.zeros_like(ok)
        for s in sat:
            some_sat |= s
        went = "saturate" if bool(some_sat[oor].all()) else "nonsaturate" if bool(some_plain[oor].all()) else "mixed"
        verdict.observed[f"output {j} overflow"] = went
    if len(readings) > 1:  # which reading the elements that tell them apart took
        apart = ~_same_numbers(readings[0].want, readings[1].want, None) & ok
        if bool(apart.any()):
            took = [r.name for r, p in zip(readings, plain) if bool(p[apart].all())]
            verdict.observed[f"output {j} {', '.join(r.name for r in readings)}"] = took[0] if took else "mixed"
    if not bool(ok.all()):
        ok = ok | _known_deviation_elements(check, fmt, got.cpu(), ok, codes_in)
        if known_deviation is not None:
            ok = ok | known_deviation(codes, ok)
    verdict.known_deviations.update(check.known_deviations)
    if bool(ok.all()):
        return
    bad = (~ok).reshape(-1)
    first = int(bad.nonzero()[0])
    index = unravel(first, tuple(got.shape))
    want_code = int(encode(readings[0].want.reshape(-1)[first : first + 1].float(), fmt)[0])
    want = _code_text(want_code, fmt)
    if bool(oor.reshape(-1)[first]):
        sat_code = int(encode(readings[0].saturated.reshape(-1)[first : first + 1].float(), fmt)[0])
        want += f" or, saturating, {_code_text(sat_code, fmt)} (out of range)"
    verdict.status = "violation"
    verdict.problem = f"output {j} ({fmt.name}) differs from {_WHAT[verdict.kind]}"
    verdict.difference = Difference(
        j, index, _code_text(int(codes.reshape(-1)[first]), fmt), want, int(bad.sum()), got.numel()
    )


def _judge_other(
    got: Any,
    wide: Any,
    j: int,
    verdict: Verdict,
    known_deviation: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> None:
    """A non-float8 output against the float64 way's answer converted to its dtype (for an
    integer output only where the value is finite and in the integer's range); ``known_deviation``: the
    elements a named deviation of the op explains (given the output and what agrees)."""
    if not isinstance(got, torch.Tensor):
        both_nan = isinstance(got, float) and isinstance(wide, float) and math.isnan(got) and math.isnan(wide)
        same = got == wide or both_nan
        if not same:
            verdict.status, verdict.problem = "violation", f"output {j}: {got!r}, want {wide!r} ({_WHAT[verdict.kind]})"
        return
    if got.is_complex():
        verdict.status, verdict.reason = "unchecked", "a complex output"
        return
    w = torch.as_tensor(wide).cpu()
    if w.shape != got.shape:
        verdict.status, verdict.problem = "violation", f"output {j}: shape {tuple(got.shape)}, want {tuple(w.shape)}"
        return
    mask = None
    if not got.is_floating_point() and got.dtype != torch.bool and w.is_floating_point():
        info = torch.iinfo(got.dtype)
        mask = torch.isfinite(w) & (w >= info.min) & (w <= info.max)
    want = w.to(got.dtype)
    ok = _same_numbers(got.cpu().double(), want.double(), mask)
    if not bool(ok.all()) and known_deviation is not None:
        ok = ok | known_deviation(got.cpu(), ok)
    if bool(ok.all()):
        return
    first = int((~ok).reshape(-1).nonzero()[0])
    verdict.status = "violation"
    verdict.problem = f"output {j} ({str(got.dtype).removeprefix('torch.')}) differs from {_WHAT[verdict.kind]}"
    verdict.difference = Difference(
        j,
        unravel(first, tuple(got.shape)),
        repr(got.cpu().reshape(-1)[first].item()),
        repr(want.reshape(-1)[first].item()),
        int((~ok).sum()),
        got.numel(),
    )


def _leaves(value: Any) -> list[Any]:
    return tree_flatten(value)[0]


# --- the kinds ----------------------------------------------------------------------------------------
def _as_float64(v: Any) -> Any:
    """The float64 way's argument, on the CPU: a float8 tensor's decoded values, a float8 dtype
    float64, a device the CPU."""
    if is_float8(v):
        return _decoded(v)
    if isinstance(v, torch.Tensor):
        return v.cpu()
    if isinstance(v, torch.dtype) and v in FLOAT8:
        return torch.float64
    return torch.device("cpu") if isinstance(v, torch.device) else v


def _movement(func: Any, args: tuple, kwargs: dict, out: Any, verdict: Verdict, name: str) -> None:
    moved = judge_movement(func, args, kwargs, out, FLOAT8, name)
    verdict.status, verdict.reason, verdict.problem = moved.status, moved.reason, moved.problem
    if moved.status == "violation" and moved.dtype is not None:
        fmt = FLOAT8[moved.dtype]
        verdict.problem = f"output {moved.output} ({fmt.name}) differs from {_WHAT['movement']}"
        verdict.difference = Difference(
            moved.output,
            moved.index,
            _code_text(moved.got, fmt),
            _code_text(moved.want, fmt),
            moved.count,
            moved.numel,
        )


def _cast_source(func: Any, args: tuple, kwargs: dict, shape: torch.Size) -> torch.Tensor:
    """The values a conversion reads, on the CPU, laid out as its output (``copy_`` broadcasts)."""
    named = named_args(func, args, kwargs)
    src = named.get("src", named.get("self"))
    assert isinstance(src, torch.Tensor)
    x = _decoded(src).float() if is_float8(src) else src.cpu()  # (a float8 value is exact in float32)
    if not x.is_floating_point():
        x = x.double()
    return x.expand(shape).contiguous()


def _cast_deviations(
    x: torch.Tensor, fmt: FloatFormat, check: OpCheck
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The elements a named deviation of torch's cast (``casts.deviations``) excuses: its inputs,
    its answer."""
    return functools.partial(excused_cast_deviations, x, fmt, counts=check.known_deviations)


def _wide_way(func: Any, args: tuple, kwargs: dict, verdict: Verdict) -> tuple[bool, Any]:
    ok, wide = survey(lambda: func(*tree_map(_as_float64, args), **tree_map(_as_float64, kwargs)))
    if not ok:
        verdict.status, verdict.reason = "unchecked", f"the float64 way refused it ({first_words(wide, 120)})"
    return ok, wide


def _unrepresented_scalar(args: tuple, kwargs: dict, out: Any) -> str | None:
    """A Python number among an arithmetic op's arguments that a float8 output's format does not
    hold: whether it takes part exactly or rounded into the format first is the install's
    (``native.scalar_ops`` observes which), so the op is left unchecked."""
    fmts = [FLOAT8[t.dtype] for t in _tensors(out) if is_float8(t)]
    for v in _leaves((args, kwargs)):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            for fmt in fmts:
                if round_by_definition(torch.tensor([float(v)], dtype=torch.float64), fmt).item() != v:
                    return f"the Python scalar {v!r} is no {fmt.name} value: exact or rounded first is the install's"
    return None


def _values(func: Any, args: tuple, kwargs: dict, out: Any, verdict: Verdict, check: OpCheck) -> None:
    if verdict.kind == "values" and (why := _unrepresented_scalar(args, kwargs, out)):
        verdict.status, verdict.reason = "unchecked", why
        return
    ok, wide = _wide_way(func, args, kwargs, verdict)
    if not ok:
        return
    got_leaves, wide_leaves = _leaves(out), _leaves(wide)
    if len(got_leaves) != len(wide_leaves):
        verdict.status = "violation"
        verdict.problem = f"{len(got_leaves)} outputs, the float64 way's {len(wide_leaves)}"
        return
    inputs = [t for t in _tensors((args, kwargs)) if is_float8(t)]
    codes_in = [_codes(t) for t in inputs]
    for j, (g, w) in enumerate(zip(got_leaves, wide_leaves)):
        if is_float8(g):
            fmt = FLOAT8[g.dtype]
            w = torch.as_tensor(w).cpu().double()
            if verdict.kind == "written":
                readings = cast_readings(w, fmt)
            else:
                readings = [rounded(w, fmt, "rounded once")]
            _judge_float8(g, readings, fmt, j, verdict, check, codes_in)
        else:
            known_deviation = None
            if inputs and isinstance(g, torch.Tensor):  # (a named deviation of the op on its input's format)
                fmt_in = FLOAT8[inputs[0].dtype]
                known_deviation = functools.partial(_known_deviation_elements, check, fmt_in, codes_in=codes_in)
            _judge_other(g, w, j, verdict, known_deviation)
            verdict.known_deviations.update(check.known_deviations)
        if verdict.status != "ok":
            return


def _cast(func: Any, args: tuple, kwargs: dict, out: Any, verdict: Verdict, check: OpCheck) -> None:
    (got,) = _tensors(out)
    fmt = FLOAT8[got.dtype]
    x = _cast_source(func, args, kwargs, got.shape)
    _judge_float8(
        got, cast_readings(x, fmt), fmt, 0, verdict, check, [], known_deviation=_cast_deviations(x, fmt, check)
    )
    if verdict.difference is not None:  # (the input it was cast from, exactly)
        value = x[verdict.difference.index].item() if x.dim() else x.item()
        verdict.difference = dataclasses.replace(verdict.difference, want=f"{verdict.difference.want} for {value!r}")


def _scaled_mm(func: Any, args: tuple, kwargs: dict, out: Any, verdict: Verdict) -> None:
    named = named_args(func, args, kwargs)
    a, b, sa, sb = named["self"], named["mat2"], named["scale_a"], named["scale_b"]
    if not (is_float8(a) and is_float8(b)) or is_float8(out) or named.get("scale_result") is not None:
        verdict.status = "unchecked"
        verdict.reason = "_scaled_mm with a float8 output or operands that are not float8: held to no bound here"
        return
    (m, k), n = a.shape, b.shape[1]
    tensorwise = sa.numel() == 1 and sb.numel() == 1
    rowwise = tuple(sa.shape) == (m, 1) and tuple(sb.shape) == (1, n)
    if not (tensorwise or rowwise) or sa.dtype != torch.float32 or sb.dtype != torch.float32:
        verdict.status = "unchecked"
        verdict.reason = (
            f"_scaled_mm scales {str(sa.dtype).removeprefix('torch.')}{list(sa.shape)} x "
            f"{str(sb.dtype).removeprefix('torch.')}{list(sb.shape)}: the tracer bounds tensorwise and rowwise "
            "float32 scales (blockwise and MX: tests/gpu/test_scaled_mm_quality.py)"
        )
        return
    # the accumulator's mantissa bits: float32's on the CPU, on a GPU the least documented width
    # within a K block, promoted or not (documented_accumulator: never a probe of this device)
    bits = within_bits(str(out.device))
    bias = named.get("bias")
    ref, bound = reference_bound(
        _decoded(a).float(),
        _decoded(b).float(),
        sa.cpu(),
        sb.cpu(),
        out.dtype,
        bias=None if bias is None else bias.cpu(),
        accum_bits=bits,
    )
    got = out.cpu().double()
    ok = ((got - ref).abs() <= bound) | (got == ref) | (torch.isnan(got) & torch.isnan(ref))
    if bool(ok.all()):
        return
    bad = (~ok).reshape(-1)
    first = int(bad.nonzero()[0])
    verdict.status = "violation"
    verdict.problem = f"output ({str(out.dtype).removeprefix('torch.')}, K={k}) outside {_WHAT['scaled_mm']}"
    verdict.difference = Difference(
        0,
        unravel(first, tuple(out.shape)),
        f"{got.reshape(-1)[first].item()!r}",
        f"{ref.reshape(-1)[first].item()!r} within {bound.reshape(-1)[first].item():.3g}",
        int(bad.sum()),
        out.numel(),
    )


def check_call(func: Any, args: tuple, kwargs: dict, out: Any) -> Verdict:
    """The call ``func(*args, **kwargs) -> out`` held to its kind's check. ``args`` and
    ``kwargs`` as they were before the call (a tensor the op writes to is a copy of it then)."""
    kind, name = classify(func, args, kwargs, out)
    verdict = Verdict(kind)
    if kind == "unchecked":
        verdict.status, verdict.reason = "unchecked", name
        return verdict
    if any(t.device.type == "meta" for t in _tensors((args, kwargs, out))):
        verdict.status, verdict.reason = "unchecked", "meta tensors hold no values"
        return verdict
    check = OpCheck(name, "", kind)
    if kind == "movement":
        _movement(func, args, kwargs, out, verdict, name)
    elif kind == "cast":
        _cast(func, args, kwargs, out, verdict, check)
    elif kind == "scaled_mm":
        _scaled_mm(func, args, kwargs, out, verdict)
    else:
        _values(func, args, kwargs, out, verdict, check)
    return verdict
