"""The install's FP8 API surface, as data the profile pins: how each float8 dtype promotes with
every other dtype and with Python scalars, what mixed arithmetic (``a + b``) does with it, and the
signatures of torch's scaled and grouped GEMM ops and the members of their enums. An argument, a
dtype rule or an enum member a release adds or removes is one line of the profile's diff.

``mixed_add`` also holds ``a + b`` to the definition: its result dtype is the promotion table's,
and its values are the decoded float8 values and the other operand added in that dtype (exactly:
every float8 value is a float32, and so is the sum of a float8 value and a float32 rounded once).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable

import torch

from ...reference.codec import decode
from ...reference.formats import FloatFormat
from ..stack.probes import float8_formats
from ..stack.refusals import first_words, survey

__all__ = ["OTHERS", "SCALARS", "promotion", "scalar_results", "mixed_add", "signatures", "collect"]

OTHERS: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "bool",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "complex64",
    )
}
SCALARS: dict[str, object] = {"int": 3, "float": 0.5, "bool": True, "complex": 1j}
# the ops whose argument lists a release changes (schemas from torch's dispatcher)
GEMM_OPS = ("aten::_scaled_mm", "aten::_scaled_mm_v2", "aten::_scaled_grouped_mm", "aten::_grouped_mm")


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _answer(fn: Callable[[], object]) -> str:
    ok, out = survey(fn)
    if not ok:  # (torch refusing is the answer)
        return f"refused: {first_words(out, 120)}"
    return _name(out) if isinstance(out, torch.dtype) else str(out)


def _float8_dtypes() -> dict[str, torch.dtype]:
    out = {}
    for fmt in float8_formats():
        dtype = fmt.torch_dtype()
        assert dtype is not None
        out[fmt.name] = dtype
    return out


def promotion() -> dict[str, str]:
    """``surface.promote.<fmt>.<other>``: ``torch.promote_types`` of each float8 dtype with every
    other dtype (and the other float8 dtypes), or its refusal."""
    f8 = _float8_dtypes()
    others = {**OTHERS, **f8}
    return {
        f"surface.promote.{name}.{other}": _answer(functools.partial(torch.promote_types, a, b))
        for name, a in f8.items()
        for other, b in others.items()
        if other != name
    }


def scalar_results() -> dict[str, str]:
    """``surface.result_type.<fmt>.<scalar>``: ``torch.result_type`` of a float8 tensor with a
    Python int, float, bool and complex."""
    return {
        f"surface.result_type.{name}.{kind}": _answer(
            functools.partial(torch.result_type, torch.zeros(2, dtype=torch.uint8).view(d), v)
        )
        for name, d in _float8_dtypes().items()
        for kind, v in SCALARS.items()
    }


def mixed_add(
    fmt: FloatFormat, other: torch.dtype, device: str = "cpu", add: Callable[..., torch.Tensor] = operator.add
) -> str:
    """``a + b`` of every ``fmt`` code with a tensor of ``other``: ``<dtype>`` when it runs, gives
    the promotion table's dtype and the definition's values (the decoded codes plus b, in that
    dtype: exact for float32 and wider); ``refused: ...``; or what differs. ``add``: a stand-in
    for ``+``."""
    dtype = fmt.torch_dtype()
    assert dtype is not None
    codes = torch.arange(256, device=device).to(torch.uint8)
    a = codes.view(dtype)
    b = torch.ones(256, device=device).to(other) if other != torch.bool else torch.ones(256, dtype=torch.bool)
    b = b.to(device)
    ok, got = survey(lambda: add(a, b))
    if not ok:  # (torch refusing is the answer)
        return f"refused: {first_words(got, 120)}"
    ok, want_dtype = survey(lambda: torch.promote_types(dtype, other))
    if not ok:
        return f"gives {_name(got.dtype)}, where the promotion table refuses the pair"
    if got.dtype != want_dtype:
        return f"gives {_name(got.dtype)}, the promotion table says {_name(want_dtype)}"
    if want_dtype in (torch.float32, torch.float64):
        exact = decode(codes.cpu(), fmt).double() + b.cpu().double()
        want = exact.to(want_dtype)
        g = got.cpu()
        same = (g == want) | (torch.isnan(g) & torch.isnan(want))
        if not bool(same.all()):
            bad = (~same).nonzero().reshape(-1)[:3].tolist()
            shown = ", ".join(f"0x{c:02x} + 1 = {g[c].item()} (definition {want[c].item()})" for c in bad)
            return f"{_name(got.dtype)}, {int((~same).sum())} of 256 values differ: {shown}"
    return _name(got.dtype)


def signatures() -> dict[str, str]:
    """``surface.schema.<op>``: the dispatcher's schemas of the scaled and grouped GEMM ops (every
    overload, joined), ``surface.signature.F.scaled_mm`` and ``surface.enum.F.<Enum>``: the
    Python API torch routes FP4 and MX GEMMs through, ``missing`` where this torch lacks one."""
    out = {}
    for op in GEMM_OPS:
        schemas = torch._C._jit_get_schemas_for_operator(op)
        out[f"surface.schema.{op.removeprefix('aten::')}"] = " | ".join(sorted(str(s) for s in schemas)) or "missing"
    fn = getattr(torch.nn.functional, "scaled_mm", None)
    out["surface.signature.F.scaled_mm"] = str(inspect.signature(fn)) if fn is not None else "missing"
    for enum in ("ScalingType", "SwizzleType"):
        kind = getattr(torch.nn.functional, enum, None)
        members = getattr(kind, "__members__", None)  # (a Python Enum or a pybind11 enum)
        out[f"surface.enum.F.{enum}"] = " ".join(members) if members is not None else "missing"
    return out


def collect(device: str = "cpu") -> dict[str, str]:
    """Every surface key for ``device`` (``a + b`` of every float8 dtype with every other one)."""
    out = {**promotion(), **scalar_results(), **signatures()}
    for fmt in float8_formats():
        for other, dtype in OTHERS.items():
            if dtype.is_floating_point or other in ("bool", "uint8", "int32"):
                out[f"surface.add.{fmt.name}.{other}"] = mixed_add(fmt, dtype, device)
    return out
