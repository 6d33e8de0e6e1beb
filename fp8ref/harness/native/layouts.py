"""The memory layouts a float8 tensor reaches an op in, besides contiguous: what training hands a
kernel (a transposed weight, a slice of a fused buffer, every other row, a view at an offset into
a flat buffer, an image batch in channels_last). A kernel that reads storage in memory order, or
writes past a view's elements, is right on contiguous inputs and wrong on these.

``relaid(sample, layout)`` gives a catalogue sample (torch's OpInfo ``SampleInput``) with every
floating tensor it holds laid out as ``layout`` says: the same shape and values, other strides and
storage offset (``native_ops`` then fills each with codes in that layout, so the float8, uint8 and
float64 ways all see it). ``place(t, layout)`` gives one tensor's copy in ``layout``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["LAYOUTS", "place", "relaid", "takes", "in_buffer", "outside", "SENTINEL", "refused_in_layouts_alone"]

SENTINEL = 0x55  # the bytes around a destination view, which a write into it must leave alone

LAYOUTS = ("contiguous", "transposed", "sliced", "stepped", "offset", "channels_last")
"""``contiguous``: as made; ``transposed``: the last two dims swapped in memory; ``sliced``: a
narrow of a wider last dim (a gap after each row, storage offset 1); ``stepped``: every other
element of a last dim twice as long; ``offset``: contiguous at storage offset 3 (an unaligned
start); ``channels_last``: a 4-d tensor in NHWC order."""


def takes(t: torch.Tensor, layout: str) -> bool:
    """Whether ``layout`` gives ``t`` other strides or offset than contiguous ones (a transposed
    vector is the vector: it does not take ``transposed``)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    if t.numel() == 0 or layout == "contiguous":
        return layout == "contiguous"
    if layout == "transposed":
        return t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1
    if layout in ("sliced", "stepped"):
        return t.dim() >= 1
    if layout == "channels_last":
        return t.dim() == 4 and t.shape[1] > 1 and t.shape[2] * t.shape[3] > 1
    return True  # offset


def place(t: torch.Tensor, layout: str) -> torch.Tensor:
    """A copy of ``t`` (its shape and values) in ``layout``; ``t`` itself when it does not take it."""
    if not takes(t, layout) or layout == "contiguous":
        return t
    shape, n = tuple(t.shape), t.shape[-1] if t.dim() else 1
    kw: dict[str, Any] = {"dtype": t.dtype, "device": t.device}
    if layout == "transposed":
        out = torch.empty(*shape[:-2], shape[-1], shape[-2], **kw).transpose(-1, -2)
    elif layout == "sliced":
        out = torch.empty(*shape[:-1], n + 2, **kw)[..., 1 : n + 1]
    elif layout == "stepped":
        out = torch.empty(*shape[:-1], 2 * n, **kw)[..., ::2]
    elif layout == "offset":
        out = torch.empty(t.numel() + 3, **kw)[3:].view(shape)
    else:
        out = torch.empty(shape, **kw).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        out.copy_(t)
    return out


def in_buffer(
    shape: tuple[int, ...], dtype: torch.dtype, layout: str, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """A destination of ``shape`` and ``dtype`` in ``layout``, a view of a storage whose every byte
    (around and between its elements too) is ``SENTINEL``; (the view, the storage's bytes)."""
    view = place(torch.empty(shape, dtype=dtype, device=device), layout)
    raw = torch.empty(0, dtype=torch.uint8, device=device).set_(view.untyped_storage())
    raw.fill_(SENTINEL)
    return view, raw


def outside(view: torch.Tensor) -> torch.Tensor:
    """Per byte of ``view``'s storage: whether it lies outside the view's elements."""
    size = view.element_size()
    inside = torch.zeros(view.untyped_storage().nbytes() // size, dtype=torch.bool, device=view.device)
    inside.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
    return ~inside.repeat_interleave(size)


def refused_in_layouts_alone(refused: dict[str, str], prefix: str, contiguous: str, fmt: str, runs: str) -> list[str]:
    """The cases starting ``prefix`` that the install refused (``refused``: case -> its words)
    while its ``contiguous`` case ran, as problems: it handles the dtype, and not in that layout
    (``runs``: how the problem says the contiguous case ran)."""
    if contiguous in refused:
        return []
    return [
        f"{case} on {fmt}: refused ({words}), while {runs}"
        for case, words in refused.items()
        if case.startswith(prefix)
    ]


class _Relaid:
    """A sample input (``input``, ``args``, ``kwargs``) with its floating tensors laid out again."""

    def __init__(self, input: Any, args: tuple, kwargs: dict[str, Any]):
        self.input, self.args, self.kwargs = input, args, kwargs


def _floating(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.is_floating_point() and not v.is_complex()


def _relay(value: Any, layout: str, hit: list[bool]) -> Any:
    if _floating(value) and takes(value, layout):
        hit.append(True)
        return place(value, layout)
    if isinstance(value, (list, tuple)):
        return type(value)(_relay(v, layout, hit) for v in value)
    return value


def relaid(sample: Any, layout: str) -> Any | None:
    """``sample`` with each floating tensor in ``layout``; None when none of them takes it."""
    if layout == "contiguous":
        return sample
    hit: list[bool] = []
    inp = _relay(sample.input, layout, hit)
    args = tuple(_relay(a, layout, hit) for a in sample.args)
    kwargs = {k: _relay(v, layout, hit) for k, v in sample.kwargs.items()}
    return _Relaid(inp, args, kwargs) if hit else None
