"""The block-scaled (MX, NVFP4) and weight-only paths, which touch a float8 dtype only at their
ends: their scales are made by integer and float32 arithmetic, and their GEMM is a plain ``mm``
of high-precision tensors. ``Follower`` watches every op the tracer sees and hands it the calls to
record, each already judged:

- ``e8m0_scale``: a power of two computed from E8M0 exponent bytes (``exp2``, ``pow`` of 2).
  torchao's ``to_mx`` computes the reciprocal scale ``exp2(127 - e)`` before the bytes ``e``
  become ``float8_e8m0fnu``, its dequantize ``pow(2, e - 127)`` after they are read back as
  ``uint8``. A call whose exponent argument is, element for element, ``e - 127`` or ``127 - e``
  for an E8M0 tensor seen in the trace (at most ``_WINDOW`` calls or E8M0 tensors apart) is that
  scale's arithmetic: recorded (its call site where it ran) and held to the definition's decode of
  E8M0 (``reference.codec.decode`` with ``E8M0FNU``: ``2^(e-127)``, or its reciprocal), exactly,
  but for the NaN code ``0xFF`` (whose NaN the caller writes in afterwards). A power of two not
  so linked is not recorded.
- ``dequantized_gemm``: values decoded from float8 codes (a conversion of an element format, or
  of E8M0 or UE4M3 scales, into a wider float dtype) are followed through views and reshapes,
  dtype conversions, ``mul``, ``div``, ``neg`` and ``where``, each step keeping the exact value in
  float64 (decoded codes times the scales the program computed) and the relative error its
  roundings may add. The ``mm``, ``addmm`` or ``bmm`` that consumes one is recorded and held to the
  exact product of those values within ``gemm_probes.reference_bound`` (the GEMM's output dtype
  and K) plus the operands' roundings; an operand further from its exact value than its
  roundings allow is named with the op and line that made it. An op that changes a followed
  value any other way (an add, an in-place write) stops following it: its GEMM is not recorded.

What a path computes before its float8 codes exist (NVFP4's E2M1 elements unpacked by integer
arithmetic, a scale made by bit shifts) is taken as the program computed it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ...reference.formats import E8M0FNU
from ..gemm.gemm_probes import half_ulp, reference_bound
from ..judge.movement import unravel
from ..judge.stored import stored_codes, values_of
from ..stack.refusals import first_words
from .call_site import call_site
from .op_checks import FLOAT8, Verdict, _decoded, named_args
from .records import Difference, TensorInfo

__all__ = ["Follower", "Linked", "KINDS"]

KINDS = ("e8m0_scale", "dequantized_gemm")

E8M0 = getattr(torch, "float8_e8m0fnu", None)
_WINDOW = 32  # (calls and E8M0 tensors kept for linking: a scale's arithmetic is next to its bytes)
_MAX_ELEMENTS = 1 << 22  # (a scale has one element per block: a larger exponent tensor is no scale)
_TF32_HALF_ULP = 2.0**-11

_SHAPE_OPS = frozenset(
    "view _unsafe_view reshape _reshape_alias t transpose permute expand squeeze unsqueeze contiguous clone "
    "detach alias lift_fresh slice select narrow flatten unflatten".split()
)
_CONVERSIONS = frozenset(("_to_copy", "to", "copy"))
_ARITHMETIC = frozenset(("mul", "div", "neg", "where"))
_GEMMS = frozenset(("mm", "addmm", "bmm"))
_POWERS = frozenset(("exp2", "pow"))


@dataclasses.dataclass(frozen=True)
class Linked:
    """A call to record: the op, its call site where it ran, its tensors, and its verdict."""

    op: str
    site: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    verdict: Verdict


@dataclasses.dataclass(frozen=True)
class _Followed:
    """A tensor's exact value by the definition (float64, on the CPU), the relative and absolute
    error the roundings on its way may add, and the op and line that made it (for a report)."""

    exact: torch.Tensor
    rel: float
    absolute: float
    made_by: str


@dataclasses.dataclass
class _Power:
    """A power-of-two call waiting for the E8M0 bytes its exponent comes from."""

    op: str
    site: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    exponent: torch.Tensor  # float64, flat
    got: torch.Tensor  # the output, on the CPU


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [v for v in tree_flatten(tree)[0] if isinstance(v, torch.Tensor)]


@functools.cache
def _writes(func: Any) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _tiny(dtype: torch.dtype) -> float:
    """Half the smallest subnormal of ``dtype``: the absolute error of one rounding near zero."""
    info = torch.finfo(dtype)
    return info.smallest_normal * info.eps / 2


def _grown(rel: float, dtype: torch.dtype) -> float:
    """``rel`` after one more rounding into ``dtype``."""
    return (1 + rel) * (1 + half_ulp(dtype)) - 1


def _factor(packet: str, v: torch.Tensor, named: dict) -> float:
    """How far ``mul`` or ``div`` may stretch an absolute error of ``v``: the other factor's
    largest finite magnitude, the divisor's smallest nonzero one's reciprocal (``neg``: 1)."""
    others = [o for o in named.values() if o is not v and isinstance(o, (torch.Tensor, int, float))]
    others = [o for o in others if not isinstance(o, bool)]
    mags = [
        o.detach().abs().double().reshape(-1) if isinstance(o, torch.Tensor) else torch.tensor([abs(float(o))])
        for o in others
    ]
    mags = [m[torch.isfinite(m)] for m in mags]
    if packet == "div":
        small = [float(m[m > 0].min()) for m in mags if bool((m > 0).any())]
        return 1 / min(small) if small else 1.0
    if packet == "mul":
        return max((float(m.max()) for m in mags if m.numel()), default=1.0)
    return 1.0


def _first(bad: torch.Tensor) -> int:
    return int(bad.reshape(-1).nonzero()[0])


class Follower:
    """What the tracer records beyond the ops on float8 dtypes (the module docstring).
    ``describe(tensor, digest)`` makes a ``TensorInfo`` (the recorder's, so records agree)."""

    def __init__(self, describe: Callable[[torch.Tensor, bool], TensorInfo]) -> None:
        self.describe = describe
        self.followed: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.powers: deque[_Power] = deque(maxlen=_WINDOW)
        self.scales: deque[torch.Tensor] = deque(maxlen=_WINDOW)  # E8M0 bytes seen, flat uint8

    # --- entry ---------------------------------------------------------------------------------------
    def after(self, func: Any, args: tuple, kwargs: dict, out: Any) -> list[Linked]:
        """The calls to record now that ``func(*args, **kwargs)`` returned ``out`` (arguments as
        the op found them)."""
        packet = func.overloadpacket.__name__
        if func.namespace != "aten":
            return []
        ins = _tensors((args, kwargs))
        if any(t.device.type == "meta" or t.layout != torch.strided for t in ins):  # (no values, or not laid out)
            return []
        if _writes(func):  # (a followed tensor written in place no longer holds its exact value)
            for t in ins:
                self.followed.pop(t, None)
            return []
        if packet == "view" and func._overloadname == "dtype":
            return self._e8m0_bytes(ins, out)
        if packet in _POWERS:
            return self._power(func, args, kwargs, out)
        followed = [t for t in ins if t in self.followed]
        if packet in _CONVERSIONS:
            self._conversion(func, args, kwargs, out, followed)
        elif not followed:
            return []
        elif packet in _SHAPE_OPS:
            self._shape(func, args, kwargs, out)
        elif packet in _ARITHMETIC:
            self._arithmetic(func, packet, args, kwargs, out)
        elif packet in _GEMMS:
            return [self._gemm(func, packet, args, kwargs, out)]
        return []

    # --- following decoded values ------------------------------------------------------------------
    def _follow(self, out: Any, exact: Any, rel: float, absolute: float, made_by: str) -> None:
        outs, exacts = _tensors(out), _tensors(exact)
        if len(outs) != len(exacts):
            return
        for o, e in zip(outs, exacts):
            if o.is_floating_point() and o.dtype not in FLOAT8 and tuple(o.shape) == tuple(e.shape):
                self.followed[o] = _Followed(e.double(), rel, absolute, made_by)

    def _exact_args(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The arguments with each followed tensor's exact value, other tensors in float64 (a
        floating one) on the CPU, devices the CPU."""

        def exact(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                f = self.followed.get(v)
                if f is not None:
                    return f.exact
                return v.detach().cpu().double() if v.is_floating_point() else v.detach().cpu()
            return torch.device("cpu") if isinstance(v, torch.device) else v

        return tree_map(exact, args), tree_map(exact, kwargs)

    def _conversion(self, func: Any, args: tuple, kwargs: dict, out: Any, followed: list[torch.Tensor]) -> None:
        named = named_args(func, args, kwargs)
        src = named.get("src", named.get("self"))
        outs = _tensors(out)
        if not isinstance(src, torch.Tensor) or len(outs) != 1 or not outs[0].is_floating_point():
            return
        dst = outs[0]
        if dst.dtype in FLOAT8:
            return
        if src in self.followed:
            f = self.followed[src]
            narrower = torch.finfo(dst.dtype).eps > torch.finfo(src.dtype).eps
            rel = _grown(f.rel, dst.dtype) if narrower else f.rel
            absolute = f.absolute + (_tiny(dst.dtype) if narrower else 0.0)
            self._follow(dst, f.exact.expand(dst.shape), rel, absolute, f.made_by)
        elif src.dtype in FLOAT8:  # (a decode: the source's codes, by the definition)
            if src.device.type == "meta" or tuple(src.shape) != tuple(dst.shape):
                return
            self._follow(dst, _decoded(src), 0.0, 0.0, f"{func} at {call_site()}")

    def _shape(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        f = next(self.followed[t] for t in _tensors((args, kwargs)) if t in self.followed)
        try:
            a, k = self._exact_args(args, kwargs)
            exact = func(*a, **k)
        except Exception:  # (the same op refused on the exact value: stop following, never fail the program)
            return
        self._follow(out, exact, f.rel, f.absolute, f.made_by)

    def _arithmetic(self, func: Any, packet: str, args: tuple, kwargs: dict, out: Any) -> None:
        outs = _tensors(out)
        if len(outs) != 1 or not outs[0].is_floating_point():
            return
        named = named_args(func, args, kwargs)
        other = named.get("other")
        if packet == "div" and (named.get("rounding_mode") is not None or named["self"] not in self.followed):
            return  # (a divisor's error is no relative bound on the quotient; a rounded quotient no product)
        if packet == "div" and isinstance(other, torch.Tensor) and other in self.followed:
            return
        rel, absolute, made = 0.0, 0.0, ""
        values = [v for v in named.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
        for v in values:
            f = self.followed.get(v)
            if f is None:
                continue
            made = made or f.made_by
            if packet == "where":  # (each element one branch's: no rounding)
                rel, absolute = max(rel, f.rel), max(absolute, f.absolute)
                continue
            rel = (1 + rel) * (1 + f.rel) - 1
            absolute += f.absolute * _factor(packet, v, named)
        try:
            a, k = self._exact_args(args, kwargs)
            exact = func(*a, **k)
        except Exception:  # (the same op refused on the exact values: stop following, never fail the program)
            return
        if packet != "where":
            rel, absolute = _grown(rel, outs[0].dtype), absolute + _tiny(outs[0].dtype)
            made = f"{func} at {call_site()}"
        self._follow(outs[0], exact, rel, absolute, made)

    # --- the GEMM ----------------------------------------------------------------------------------
    def _gemm(self, func: Any, packet: str, args: tuple, kwargs: dict, out: torch.Tensor) -> Linked:
        named = named_args(func, args, kwargs)
        a, b = named["mat1" if packet == "addmm" else "self"], named["mat2"]
        ins = tuple(self.describe(t, True) for t in _tensors((args, kwargs)))
        linked = functools.partial(Linked, str(func), call_site(), ins, (self.describe(out, True),))
        verdict = Verdict("dequantized_gemm")
        try:
            self._judge_gemm(packet, named, a, b, out, verdict)
        except Exception as exc:  # (degrade: recorded unchecked, with why)
            verdict.status, verdict.reason, verdict.problem = "unchecked", first_words(exc, 160), ""
            verdict.difference = None
        return linked(verdict)

    def _operand(self, t: torch.Tensor, name: str, verdict: Verdict) -> tuple[torch.Tensor, float, float]:
        """A GEMM operand's exact value and the error its path may add; a followed operand
        further from its exact value than that is the verdict's problem."""
        f = self.followed.get(t)
        if f is None:
            return t.detach().cpu().double(), 0.0, 0.0
        got = t.detach().cpu().double()
        ok = ((got - f.exact).abs() <= f.rel * f.exact.abs() + f.absolute) | (got == f.exact)
        ok |= torch.isnan(got) & torch.isnan(f.exact)
        if not bool(ok.all()) and verdict.status == "ok":
            first = _first(~ok)
            verdict.status = "violation"
            verdict.problem = (
                f"operand {name} is not the decoded codes times their scales (within its roundings): "
                f"made by {f.made_by}"
            )
            verdict.difference = Difference(
                0,
                unravel(first, tuple(t.shape)),
                repr(got.reshape(-1)[first].item()),
                repr(f.exact.reshape(-1)[first].item()),
                int((~ok).sum()),
                t.numel(),
            )
        return f.exact, f.rel, f.absolute

    def _judge_gemm(
        self, packet: str, named: dict, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, verdict: Verdict
    ) -> None:
        if out.is_complex() or not out.is_floating_point():
            verdict.status, verdict.reason = "unchecked", "a GEMM output that is not a real float"
            return
        if packet == "addmm" and (named.get("beta", 1) != 1 or named.get("alpha", 1) != 1):
            verdict.status, verdict.reason = "unchecked", "addmm with alpha or beta other than 1: no bound here"
            return
        ea, ra, aa = self._operand(a, "self" if packet != "addmm" else "mat1", verdict)
        eb, rb, ab = self._operand(b, "mat2", verdict)
        bias: torch.Tensor | None = None
        bias_error: torch.Tensor | float = 0.0
        if packet == "addmm":
            bias, rc, ac = self._operand(named["self"], "self", verdict)
            bias_error = rc * bias.abs() + ac
        if verdict.status != "ok":
            return
        bits, tf32 = _accumulator(out)
        if tf32:  # (each operand rounded to TF32's 10 mantissa bits first)
            ra, rb = (1 + ra) * (1 + _TF32_HALF_ULP) - 1, (1 + rb) * (1 + _TF32_HALF_ULP) - 1
        batches = [(ea, eb)] if packet != "bmm" else list(zip(ea, eb))
        refs, bounds = [], []
        one = torch.ones((), dtype=torch.float64)
        for x, y in batches:
            ref, bound = reference_bound(x, y, one, one, out.dtype, bias=bias, accum_bits=bits)
            mag = x.abs() @ y.abs()
            k = x.shape[-1]
            operands = (ra + rb + ra * rb) * mag + aa * y.abs().sum(0) + ab * x.abs().sum(1)[:, None] + aa * ab * k
            refs.append(ref)
            bounds.append(bound + operands + bias_error + _tiny(out.dtype))
        ref = refs[0] if packet != "bmm" else torch.stack(refs)
        bound = bounds[0] if packet != "bmm" else torch.stack(bounds)
        got = out.detach().cpu().double()
        ok = ((got - ref).abs() <= bound) | (got == ref) | (torch.isnan(got) & torch.isnan(ref))
        if bool(ok.all()):
            return
        first = _first(~ok)
        verdict.status = "violation"
        verdict.problem = (
            f"output ({str(out.dtype).removeprefix('torch.')}, K={ea.shape[-1]}) outside the exact product of the "
            "decoded operands within the derived bound"
        )
        verdict.difference = Difference(
            0,
            unravel(first, tuple(out.shape)),
            repr(got.reshape(-1)[first].item()),
            f"{ref.reshape(-1)[first].item()!r} within {bound.reshape(-1)[first].item():.3g}",
            int((~ok).sum()),
            out.numel(),
        )

    # --- E8M0 scale arithmetic -----------------------------------------------------------------------
    def _e8m0_bytes(self, ins: list[torch.Tensor], out: Any) -> list[Linked]:
        """A ``view`` between E8M0 and bytes: its bytes join those a power of two may be linked
        to; the powers waiting for them are judged."""
        if E8M0 is None or len(ins) != 1:
            return []
        outs = _tensors(out)
        if len(outs) != 1 or E8M0 not in (ins[0].dtype, outs[0].dtype):
            return []
        other = outs[0] if ins[0].dtype == E8M0 else ins[0]
        if other.dtype not in (torch.uint8, E8M0) or other.numel() > _MAX_ELEMENTS:
            return []
        codes = stored_codes(other.detach()).reshape(-1)  # (read from storage: judge.stored)
        self.scales.append(codes)
        linked: list[Linked] = []
        waiting: deque[_Power] = deque(maxlen=_WINDOW)
        for p in self.powers:
            verdict = _judge_power(p, codes)
            if verdict is None:
                waiting.append(p)
            else:
                linked.append(Linked(p.op, p.site, p.inputs, p.outputs, verdict))
        self.powers = waiting
        return linked

    def _power(self, func: Any, args: tuple, kwargs: dict, out: Any) -> list[Linked]:
        named = named_args(func, args, kwargs)
        outs = _tensors(out)
        if len(outs) != 1 or not outs[0].is_floating_point() or outs[0].numel() > _MAX_ELEMENTS:
            return []
        exp2 = func.overloadpacket.__name__ == "exp2"
        exponent = named.get("self" if exp2 else "exponent")
        if not isinstance(exponent, torch.Tensor) or exponent.numel() != outs[0].numel():
            return []  # (``x.pow(2)``, a square, among them: no scale)
        if not exp2:
            base = named.get("self")
            if isinstance(base, (int, float)):
                two = base == 2
            else:
                two = isinstance(base, torch.Tensor) and bool((base == 2).all())
            if not two:
                return []
        x = exponent.detach().cpu().double().reshape(-1)
        if not bool((x == x.round()).all()) or not bool((x.abs() <= 128).all()):
            return []  # (an E8M0 exponent is an integer within the bias)
        ins = tuple(self.describe(t, True) for t in _tensors((args, kwargs)))
        p = _Power(str(func), call_site(), ins, (self.describe(outs[0], True),), x, outs[0].detach().cpu())
        for codes in reversed(self.scales):
            verdict = _judge_power(p, codes)
            if verdict is not None:
                return [Linked(p.op, p.site, p.inputs, p.outputs, verdict)]
        self.powers.append(p)
        return []


def _judge_power(p: _Power, codes: torch.Tensor) -> Verdict | None:
    """The power of two against the E8M0 bytes ``codes``: None when its exponent is not theirs
    (``e - 127`` or ``127 - e`` elementwise), else held to the definition's decode."""
    if codes.numel() != p.exponent.numel():
        return None
    e = codes.double() - E8M0FNU.bias
    if torch.equal(p.exponent, e):
        want, what = values_of(codes, E8M0FNU), "2^(e-127)"
    elif torch.equal(p.exponent, -e):
        want, what = 1 / values_of(codes, E8M0FNU), "2^(127-e)"
    else:
        return None
    verdict = Verdict("e8m0_scale")
    nan_code = codes == 0xFF  # (the caller writes NaN there itself)
    want = want.to(p.got.dtype).double()
    got = p.got.double().reshape(-1)
    ok = (got == want) | nan_code
    if bool(ok.all()):
        return verdict
    first = _first(~ok)
    verdict.status = "violation"
    verdict.problem = f"output ({str(p.got.dtype).removeprefix('torch.')}) differs from the E8M0 decode {what}"
    verdict.difference = Difference(
        0,
        unravel(first, tuple(p.got.shape)),
        repr(got[first].item()),
        f"{want[first].item()!r} for E8M0 code 0x{int(codes[first]):02x}",
        int((~ok).sum()),
        got.numel(),
    )
    return verdict


def _accumulator(out: torch.Tensor) -> tuple[int, bool]:
    """The accumulator's mantissa bits for a GEMM writing ``out``, and whether its operands are
    rounded to TF32 first: float32's on the CPU; on a GPU the output dtype's where torch lets
    cuBLAS reduce in it (``allow_bf16/fp16_reduced_precision_reduction``), TF32 operands where
    ``allow_tf32`` is on for a float32 GEMM."""
    if out.device.type == "cpu":
        return 23, False
    matmul = torch.backends.cuda.matmul
    if out.dtype == torch.float32:
        return 23, bool(matmul.allow_tf32)
    reduced = {
        torch.bfloat16: getattr(matmul, "allow_bf16_reduced_precision_reduction", True),
        torch.float16: getattr(matmul, "allow_fp16_reduced_precision_reduction", True),
    }.get(out.dtype, False)
    return (round(-math.log2(torch.finfo(out.dtype).eps)) if reduced else 23), False
