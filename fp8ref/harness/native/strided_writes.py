"""Writes into a float8 destination in every memory layout (``layouts.LAYOUTS``): ``fill_``,
``zero_``, ``t[:, 1] = v``, ``t[mask] = v``, ``index_put_`` and ``masked_fill_`` on a view that is
transposed, sliced, stepped, at an offset or channels_last, as training writes into a slice of a
fused buffer or a transposed weight. Each must put ``.to``'s code of the value on exactly the
elements it addresses, leave every other element's code as it was, and touch no byte of the
storage outside the view (``layouts.SENTINEL`` around it). A kernel that writes in memory order,
ignoring the view's strides, is right on contiguous destinations alone. ``copy_``'s layouts are
``native_checks.check_copy``'s; which values each path accepts, ``native_checks.check_written``'s.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from ...reference.formats import FloatFormat
from ..stack.refusals import first_words, survey
from .layouts import LAYOUTS, in_buffer, outside, refused_in_layouts_alone

__all__ = ["WRITES", "check_strided_writes"]

_SHAPE = (2, 4, 4, 8)  # 4-d, so every layout applies (channels_last too)
_VALUE = 0.3  # between two codes of every float8 format: what lands is .to's rounding of it

Write = Callable[[torch.Tensor, float, torch.Tensor], Any]  # (destination, value, mask)


def _index_put(dst: torch.Tensor, v: float, mask: torch.Tensor) -> Any:
    rows, cols = torch.tensor([0, 1, 1], device=dst.device), torch.tensor([2, 0, 3], device=dst.device)
    # (the value as a float8 tensor, .to's: index_put_ takes no other dtype)
    return dst.index_put_((rows, cols), torch.tensor(v, dtype=torch.float32, device=dst.device).to(dst.dtype))


def _setitem(dst: torch.Tensor, v: float, where: Any) -> None:
    dst[where] = v


WRITES: dict[str, Write] = {
    "fill_": lambda dst, v, mask: dst.fill_(v),
    "zero_": lambda dst, v, mask: dst.zero_(),
    "t[:, 1] = v": lambda dst, v, mask: _setitem(dst, v, (slice(None), 1)),
    "t[mask] = v": lambda dst, v, mask: _setitem(dst, v, mask),
    "index_put_": _index_put,
    "masked_fill_": lambda dst, v, mask: dst.masked_fill_(mask, v),
}


def _addressed(how: str, mask: torch.Tensor) -> torch.Tensor:
    """Which elements ``how`` writes (a bool tensor of ``_SHAPE``)."""
    if how in ("fill_", "zero_"):
        return torch.ones(_SHAPE, dtype=torch.bool)
    if how == "t[:, 1] = v":
        hit = torch.zeros(_SHAPE, dtype=torch.bool)
        hit[:, 1] = True
        return hit
    if how == "index_put_":
        hit = torch.zeros(_SHAPE, dtype=torch.bool)
        hit[[0, 1, 1], [2, 0, 3]] = True
        return hit
    return mask.cpu()


def _one(how: str, write: Write, layout: str, fmt: FloatFormat, device: str) -> tuple[str | None, str | None]:
    """(a problem, or None; the install's words when it refused the write, or None)."""
    dtype = fmt.torch_dtype()
    assert dtype is not None
    n = math.prod(_SHAPE)
    # (codes 0x01-0x7e: nonzero; an infinity's or a NaN's among them in some formats, compared by byte)
    before_codes = (torch.arange(n, dtype=torch.int64) * 7 % 126 + 1).to(torch.uint8).view(_SHAPE)
    view, raw = in_buffer(_SHAPE, torch.uint8, layout, device)
    view.copy_(before_codes.to(device))  # (uint8 into uint8: the codes laid out, no float8 kernel involved)
    before_raw = raw.clone()
    mask = (torch.arange(n) % 3 == 0).view(_SHAPE).to(device)
    value = 0.0 if how == "zero_" else _VALUE
    ok, got = survey(functools.partial(write, view.view(dtype), value, mask))
    if not ok:
        # (the same write into float32, in the same layout, must run: else the call itself is
        # wrong, fp8ref's, and raises here instead of reading as the install's refusal)
        write(in_buffer(_SHAPE, torch.float32, layout, device)[0], value, mask)
        return None, first_words(got, 160)
    code = torch.tensor([value], dtype=torch.float64).to(dtype).view(torch.uint8)  # (.to: held to the codec elsewhere)
    want = torch.where(_addressed(how, mask), code, before_codes)
    now = view.cpu()
    if not torch.equal(now, want):
        bad = (now != want).reshape(-1).nonzero().reshape(-1)
        i = int(bad[0])
        role = "written" if bool(_addressed(how, mask).reshape(-1)[i]) else "kept"
        return (
            f"{len(bad)} of {n} elements wrong; element {i} holds 0x{int(now.reshape(-1)[i]):02x}, "
            f"want 0x{int(want.reshape(-1)[i]):02x} ({role})"
        ), None
    touched = outside(view) & (raw != before_raw)
    if bool(touched.any()):
        at = touched.nonzero().reshape(-1)[:4].tolist()
        return f"{int(touched.sum())} byte(s) of the storage outside the view written, at {at}", None
    return None, None


def check_strided_writes(
    fmt: FloatFormat, device: str = "cpu", writes: dict[str, Write] | None = None
) -> tuple[list[str], dict[str, str]]:
    """Each write (``WRITES``, or stand-ins: name -> ``fn(destination, value, mask)``) into a
    float8 destination in each layout. (problems, refusals: case -> the install's words; a write
    refused in a layout while it runs into a contiguous destination is a problem: the install
    writes the dtype, and not in that layout)."""
    if fmt.torch_dtype() is None:
        raise ValueError(f"fmt: expected a format torch has a dtype for, got {fmt.name}")
    unknown = sorted(set(writes or ()) - set(WRITES))
    if unknown:  # (what each write addresses is known by its name)
        raise ValueError(f"writes: expected names among {sorted(WRITES)}, got {unknown}")
    problems: list[str] = []
    refused: dict[str, str] = {}
    for how, write in (writes if writes is not None else WRITES).items():
        for layout in LAYOUTS:
            case = f"{how} into a destination laid out {layout}"
            problem, words = _one(how, write, layout, fmt, device)
            if words is not None:
                refused[case] = words
            if problem is not None:
                problems.append(f"{case} on {fmt.name}: {problem}")
        contiguous = f"{how} into a destination laid out contiguous"
        problems += refused_in_layouts_alone(
            refused, f"{how} into", contiguous, fmt.name, "a contiguous one is written"
        )
    return problems, refused
