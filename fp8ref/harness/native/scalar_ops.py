"""Python scalars in float8 arithmetic and comparisons (``t * 0.5``, ``t + 1``, ``t == 0``,
``t.mul_(2)``), held to the definition on every code of every float8 dtype.

torch's promotion rules (pinned in ``surface``: ``torch.result_type`` of a float8 tensor and a
Python scalar is the float8 dtype) leave one thing to the implementation: whether the scalar
takes part with its exact value or is first rounded into the tensor's dtype. torch does the
latter for float16 and bfloat16 comparisons (``float16 0 == 1e-9`` is True), and for float8 it
means ``e5m2 t == 500.0`` holds for 512 and ``e8m0fnu t == 0`` for 2^-127. Both semantics are
defined, so each op's answer must be one of them, exactly:

- ``exact``: the op on the definition's value of each code and the scalar's own value, computed
  in float64, rounded once into the output's dtype by the definition (a comparison: exact);
- ``rounded``: the same with the scalar first written into the dtype as ``.to`` writes it from
  float64 (rounded once; itself held to the codec elsewhere).

The scalars are chosen so that float64 is exact for the op or, where it is not (``0.1``, a
division by 3), no float8 rounding boundary lies within float32's rounding of the result (the
boundaries are short binary fractions, the results are not): an implementation computing in
float32 rounds to the same code. Overflow past max (saturate or not) is observed, not asserted.
Which semantics an install uses is pinned (``native.scalar.<op>``), so a release that changes it
is one named line; an answer that is neither fails, naming the codes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from ...reference.codec import decode
from ...reference.definition import overflows, round_by_definition
from ...reference.formats import FloatFormat
from ..stack.refusals import first_words, survey

__all__ = ["SCALARS", "SCALAR_OPS", "ScalarCheck", "check_scalar_op", "profile_value"]

# name -> the Python scalar: exact in float8 or not, an int, a bool, signed zero, past max,
# below the smallest subnormal, inf and NaN
SCALARS: dict[str, float | int | bool] = {
    "3": 3,
    "0.5": 0.5,
    "-1.5": -1.5,
    "0.1": 0.1,
    "True": True,
    "-0.0": -0.0,
    "500.0": 500.0,
    "1e-09": 1e-9,
    "inf": math.inf,
    "nan": math.nan,
}


# an op of a float8 tensor and a Python scalar (or of float64 values and one, for the definition)
_Op = Callable[[torch.Tensor, Any], Any]


def _inplace(method: str) -> _Op:
    return lambda t, s: getattr(t.clone(), method)(s)


# op name -> (what torch is asked, what the definition computes on float64 values); "r" ops put
# the scalar on the left
SCALAR_OPS: dict[str, _Op] = {
    "mul": operator.mul,
    "rmul": lambda t, s: s * t,
    "add": operator.add,
    "radd": lambda t, s: s + t,
    "sub": operator.sub,
    "rsub": lambda t, s: s - t,
    "div": operator.truediv,
    "rdiv": lambda t, s: s / t,
    "mul_": _inplace("mul_"),
    "add_": _inplace("add_"),
    "sub_": _inplace("sub_"),
    "div_": _inplace("div_"),
    "pow": operator.pow,
    "clamp_min": lambda t, s: torch.clamp(t, min=s),
    "clamp_max": lambda t, s: torch.clamp(t, max=s),
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
# pow's exponents: those whose float64 power is exact or correctly placed (a square root of a
# float8 value is never a float8 midpoint); a general real power is a transcendental function
POW_SCALARS = ("3", "0.5", "True", "-0.0", "nan")

_SHOWN = 4


@dataclasses.dataclass
class ScalarCheck:
    op: str
    fmt: str
    semantics: dict[str, str] = dataclasses.field(default_factory=dict)  # scalar -> exact/rounded/either
    refused: dict[str, str] = dataclasses.field(default_factory=dict)  # scalar -> the install's words
    overflow: dict[str, str] = dataclasses.field(default_factory=dict)  # scalar -> saturate/nonsaturate/mixed
    problems: list[str] = dataclasses.field(default_factory=list)


def _rounded_scalar(s: float | int | bool, dtype: torch.dtype, fmt: FloatFormat) -> float | None:
    """``s`` written into ``dtype`` as ``.to`` writes it from float64, as a Python float; None when
    ``.to`` refuses it."""
    ok, code = survey(lambda: torch.tensor([float(s)], dtype=torch.float64).to(dtype).view(torch.uint8))
    return float(decode(code, fmt)[0]) if ok else None  # (None: the cast refuses the value)


def _same(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Equal with the same sign of zero, or both NaN (float64)."""
    return ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))


def _judge(
    got: torch.Tensor, wide: torch.Tensor, fmt: FloatFormat, dtype: torch.dtype
) -> tuple[torch.Tensor, str | None]:
    """Where ``got`` is the float64 result ``wide`` in ``got``'s dtype (rounded once into float8
    by the definition; a past-max result either way), and what the past-max results became
    (``saturate``: +-max, ``nonsaturate``, ``mixed``; None when none overflowed)."""
    if got.dtype == torch.bool:
        return got.cpu() == wide.bool(), None
    if got.dtype == dtype:
        got_v = decode(got.cpu().contiguous().view(torch.uint8), fmt).double()
        over = overflows(wide, fmt)
        same = _same(got_v, round_by_definition(wide, fmt)) | over
        if not bool(over.any()):
            return same, None
        sat = got_v[over].abs() == fmt.max
        return same, "saturate" if bool(sat.all()) else ("nonsaturate" if not bool(sat.any()) else "mixed")
    return _same(got.cpu().double(), wide.to(got.dtype).double()), None


def check_scalar_op(
    name: str,
    fmt: FloatFormat,
    device: str = "cpu",
    fn: _Op | None = None,
) -> ScalarCheck:
    """``SCALAR_OPS[name]`` (or ``fn``, a stand-in) on every code of ``fmt`` with each scalar
    (``SCALARS``; ``POW_SCALARS`` for ``pow``): which semantics (module docstring) each answer
    follows, what the install refuses, and a problem for each answer that follows neither or
    whose dtype is not the promotion table's."""
    op = fn if fn is not None else SCALAR_OPS[name]
    definition = SCALAR_OPS[name]
    dtype = fmt.torch_dtype()
    assert dtype is not None
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    values = decode(codes, fmt).double()
    check = ScalarCheck(name, fmt.name)
    for label in POW_SCALARS if name == "pow" else SCALARS:
        s = SCALARS[label]
        ran, got = survey(functools.partial(op, codes.to(device).view(dtype), s))
        if not ran:  # (torch refusing the op, or this scalar)
            check.refused[label] = first_words(got, 120)
            continue
        want_dtype = dtype if name.endswith("_") else torch.result_type(codes.view(dtype), s)
        want_dtype = torch.bool if name in ("eq", "ne", "lt", "le", "gt", "ge") else want_dtype
        if got.dtype != want_dtype:
            check.problems.append(
                f"{name} on {fmt.name} with {label}: gives {got.dtype}, the promotion table {want_dtype}"
            )
            continue
        answers = {"exact": s}
        rounded = _rounded_scalar(s, dtype, fmt)
        if rounded is not None:
            answers["rounded"] = rounded
        held = {}
        for semantics, operand in answers.items():
            with torch.no_grad():
                wide = definition(values.clone(), operand)
            ok, over = _judge(got, wide, fmt, dtype)
            held[semantics] = ok
            if over is not None and bool(ok.all()):
                check.overflow[label] = over
        fits = [k for k, ok in held.items() if bool(ok.all())]
        if fits:
            check.semantics[label] = "either" if len(fits) == 2 else fits[0]
            continue
        bad = (~held["exact"]).nonzero().reshape(-1)[:_SHOWN].tolist()
        got_codes = got.cpu().view(torch.uint8) if got.dtype == dtype else got.cpu()
        shown = ", ".join(f"0x{c:02x} -> {got_codes[c].tolist()}" for c in bad)
        check.problems.append(
            f"{name} on {fmt.name} with the scalar {label}: {int((~held['exact']).sum())} of 256 codes follow "
            f"neither the scalar's exact value nor its value rounded into {fmt.name}: {shown}"
        )
    return check


def profile_value(check: ScalarCheck) -> str:
    """One format's answer as a profile word without spaces: ``refused``; ``exact``, ``rounded``
    (the scalar rounded into the dtype first) or ``either`` (no scalar told them apart), with
    ``+partial`` when some scalars were refused and ``+saturate`` / ``+nonsaturate`` / ``+mixed``
    for what a result past max became; ``differs`` when an answer followed neither."""
    if check.problems:
        return "differs"
    if not check.semantics:
        return "refused"
    kinds = set(check.semantics.values()) - {"either"}
    base = "either" if not kinds else (kinds.pop() if len(kinds) == 1 else "mixed")
    overflow = set(check.overflow.values())
    over = "" if not overflow else "+" + (overflow.pop() if len(overflow) == 1 else "mixed")
    return base + ("+partial" if check.refused else "") + over
