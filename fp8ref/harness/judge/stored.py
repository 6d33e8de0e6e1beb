"""A tensor's bytes as its storage holds them, read by index arithmetic, never through the
install's copy kernels (``contiguous``, ``clone``, ``view(uint8)`` then an index): an element at
index ``(i0, i1, ...)`` of a tensor with strides ``s`` and storage offset ``o`` is the
``o + sum(ik * sk)``-th element of its storage (torch's strided layout, ``torch.Tensor.stride``).
The bytes are copied out of the storage as memory (``ctypes.string_at`` on the CPU; a device's
storage is copied to the host as one contiguous block first), then gathered by those positions
with int64 arithmetic: no kernel that writes a one-byte dtype runs on them.

``snapshot`` keeps a tensor as an op finds it (its bytes and its layout) the same way, for the
arguments an op writes to."""

from __future__ import annotations

import ctypes
import functools
import math

import torch

from ...reference.codec import decode_table
from ...reference.formats import FloatFormat

__all__ = [
    "positions",
    "stored_codes",
    "codes_at",
    "logical_bytes",
    "snapshot",
    "partial",
    "written_outside",
    "values_of",
    "readable",
]


def readable(t: torch.Tensor) -> bool:
    """Whether ``t`` holds bytes to read: a strided tensor whose storage is real memory on a real
    device (a plain tensor, a parameter, a subclass made by ``as_subclass``), not a meta, fake or
    functional tensor, nor a wrapper subclass, whose storage holds no values."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.device.type == "meta" or t.is_quantized:
        return False
    try:
        storage = t.untyped_storage()
        real = storage.device.type != "meta" and (storage.data_ptr() != 0 or storage.nbytes() == 0)
    except (RuntimeError, NotImplementedError, TypeError):  # (a wrapper subclass has no storage to give)
        return False
    # (a view past its storage's end, FSDP's freed storage resized to 0: no bytes there to read)
    return real and (t.numel() == 0 or (bounds(t)[1] + 1) * t.element_size() <= storage.nbytes())


def bounds(t: torch.Tensor) -> tuple[int, int]:
    """The first and last storage positions (in elements) a non-empty strided view reaches, by
    arithmetic on its sizes, strides and offset (torch's strides are never negative)."""
    first = int(t.storage_offset())
    return first, first + sum((int(n) - 1) * int(s) for n, s in zip(t.shape, t.stride()) if n)


def positions(size: tuple[int, ...], stride: tuple[int, ...], offset: int) -> torch.Tensor:
    """The storage position (in elements) of every element of a strided view, in its logical
    order: an int64 tensor of shape ``size``."""
    pos = torch.full((), offset, dtype=torch.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        # (arange's own step, not a multiplication: a program under trace may replace aten's mul)
        steps = torch.arange(0, n * s, s, dtype=torch.int64) if s and n else torch.zeros(n, dtype=torch.int64)
        pos = pos + steps.reshape(shape)
    return pos.expand(tuple(size)) if size else pos


def _raw(t: torch.Tensor, first: int, count: int) -> bytes:
    """``count`` bytes of ``t``'s storage from byte ``first``, copied as memory."""
    if count <= 0:
        return b""
    storage = t.untyped_storage()
    if not readable(t):  # (a fake tensor's storage is no memory: reading it would crash the process)
        raise ValueError(f"t: a {type(t).__name__} on {t.device} holds no bytes to read")
    if first < 0 or first + count > storage.nbytes():
        raise IndexError(f"bytes {first}..{first + count} of a storage of {storage.nbytes()}")
    if t.device.type != "cpu":  # (one contiguous block to the host: a memory copy, no element kernel)
        block = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage, first, (count,), (1,))
        host = block.cpu()
        return ctypes.string_at(host.untyped_storage().data_ptr(), count)
    return ctypes.string_at(storage.data_ptr() + first, count)


@functools.cache
def _numpy() -> object | None:
    """numpy, where it is installed and torch can hand it memory (fp8ref's own need: optional)."""
    try:
        import numpy

        torch.from_numpy(numpy.zeros(1, dtype=numpy.int64))
    except (ImportError, RuntimeError):
        return None
    return numpy


def _as_int64(raw: bytes) -> torch.Tensor:
    """``raw``'s bytes widened to int64: by numpy where it is there; without it by torch's
    conversion of a contiguous uint8 buffer (a cast reading one byte an element, not the movement
    kernels under check; a Python list of the bytes would take gigabytes for a large tensor)."""
    np = _numpy()
    if np is not None:
        return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).astype(np.int64))  # type: ignore[attr-defined]
    if not raw:
        return torch.zeros(0, dtype=torch.int64)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.int64)


def _to_bytes(values: torch.Tensor) -> bytes:
    np = _numpy()
    if np is not None:
        return values.numpy().astype(np.uint8).tobytes()  # type: ignore[attr-defined]
    return bytes(values.tolist())


def _gather(raw: bytes, index: torch.Tensor) -> torch.Tensor:
    """``raw``'s bytes at ``index`` (int64, any shape), as int64: through numpy where it is there
    (the bytes gathered in place, only the picked ones widened), else a list of the span."""
    np = _numpy()
    if np is not None:
        picked = np.frombuffer(raw, dtype=np.uint8)[index.numpy()]  # type: ignore[attr-defined]
        return torch.from_numpy(picked.astype(np.int64))  # type: ignore[attr-defined]
    return _as_int64(raw)[index]


def codes_at(t: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """The bytes of one-byte ``t``'s storage at positions ``pos`` (int64, any shape), as int64."""
    if t.element_size() != 1:
        raise ValueError(f"t: a one-byte dtype holds codes, got {t.dtype}")
    if pos.numel() == 0:
        return torch.zeros(pos.shape, dtype=torch.int64)
    lo, hi = int(pos.min()), int(pos.max())
    return _gather(_raw(t, lo, hi - lo + 1), pos - lo)


def stored_codes(t: torch.Tensor) -> torch.Tensor:
    """A one-byte tensor's codes in its logical order, as int64 on the CPU, read from its storage."""
    if t.element_size() != 1:
        raise ValueError(f"t: a one-byte dtype holds codes, got {t.dtype}")
    if t.numel() == 0:
        return torch.zeros(tuple(t.shape), dtype=torch.int64)
    lo, hi = bounds(t)
    if t.is_contiguous():  # (its elements are its storage's bytes in order)
        return _as_int64(_raw(t, lo, t.numel())).reshape(tuple(t.shape))
    raw = _raw(t, lo, hi - lo + 1)
    return _as_int64(_in_order(raw, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()) - lo, 1)).reshape(
        tuple(t.shape)
    )


def values_of(codes: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """The definition's value of each code (int64 or uint8), float64: its decode table, indexed."""
    return decode_table(fmt).double()[codes.long()]


def _in_order(raw: bytes, shape: tuple[int, ...], stride: tuple[int, ...], offset: int, size: int) -> bytes:
    """The elements (``size`` bytes each) of the strided view ``shape``/``stride``/``offset`` (in
    elements, from ``raw``'s start) over ``raw``, in logical order: numpy's strided view where numpy
    is there (its copy is the only one made), else in slices along the first dimension (positions
    for one slice at a time)."""
    np = _numpy()
    if np is not None:
        flat = np.frombuffer(raw, dtype=np.dtype(f"V{size}") if size > 1 else np.uint8)  # type: ignore[attr-defined]
        view = np.lib.stride_tricks.as_strided(  # type: ignore[attr-defined]
            flat[offset:], shape=shape, strides=tuple(s * size for s in stride), writeable=False
        )
        return bytes(view.tobytes())
    out = bytearray()
    wide = _as_int64(raw)
    rows = shape[0] if shape else 1
    step = max(1, (1 << 20) // max(1, math.prod(shape[1:])))
    for first in range(0, rows, step):
        n = min(step, rows - first)
        part = (n, *shape[1:]) if shape else ()
        pos = positions(part, stride, offset + first * (stride[0] if shape else 0)).reshape(-1)
        index = (pos * size).reshape(-1, 1) + torch.arange(size, dtype=torch.int64)
        out += bytes(wide[index.reshape(-1)].tolist())
    return bytes(out)


def logical_bytes(t: torch.Tensor) -> bytes:
    """Every element's bytes in the tensor's logical order (any dtype): what
    ``t.contiguous().view(torch.uint8)`` holds, read from storage."""
    if t.numel() == 0:
        return b""
    size = t.element_size()
    lo, hi = bounds(t)
    if t.is_contiguous():  # (laid out in order already)
        return _raw(t, lo * size, t.numel() * size)
    raw = _raw(t, lo * size, (hi - lo + 1) * size)
    return _in_order(raw, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()) - lo, size)


# storages up to this many bytes are kept whole (a view's storage offset and every byte an
# ``as_strided`` of it may reach stay as they were); a larger one keeps the bytes its view reaches
WHOLE_STORAGE_BYTES = 1 << 22
_KEPT = "_fp8ref_kept"  # a snapshot's attribute: (first byte kept, bytes kept, original storage's address, its size)


def snapshot(t: torch.Tensor, host: bool = False) -> torch.Tensor:
    """``t`` as it is now, in a buffer of its own: its dtype, device, shape and strides and the
    bytes of its storage (``partial`` says when only those its view reaches were kept), copied as
    memory, never by ``clone``, whose kernel is under check. ``host``: kept on the CPU whatever
    ``t``'s device."""
    device = torch.device("cpu") if host else t.device
    if t.numel() == 0:
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=device)
    size, storage = t.element_size(), t.untyped_storage()
    nbytes = storage.nbytes()
    if nbytes <= WHOLE_STORAGE_BYTES:
        lo, hi = 0, nbytes // size - 1
    else:
        lo, hi = bounds(t)
    buffer = torch.frombuffer(bytearray(_raw(t, lo * size, (hi - lo + 1) * size)), dtype=torch.uint8)
    held = buffer.view(t.dtype)
    if device.type != "cpu":
        held = held.to(device)  # (one contiguous block: a memory copy)
    kept = held.as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset() - lo)
    setattr(kept, _KEPT, (lo * size, (hi - lo + 1) * size, storage.data_ptr(), nbytes))
    return kept


def partial(t: torch.Tensor) -> bool:
    """Whether ``t`` is a snapshot that kept only the bytes its view reaches (its storage offset
    is not the original's)."""
    kept = getattr(t, _KEPT, None)
    return kept is not None and (kept[0] > 0 or kept[1] < kept[3])


def written_outside(after: torch.Tensor, kept: torch.Tensor) -> tuple[int, int, int, int] | None:
    """The bytes of ``after``'s storage outside its view that differ from its snapshot ``kept``
    (taken before an op wrote into ``after``): ``(how many, the first one's storage byte, was,
    now)``, or None when none did (or the snapshot cannot tell: the op gave ``after`` another
    storage, or nothing was kept)."""
    meta = getattr(kept, _KEPT, None)
    if meta is None or not readable(after):
        return None
    first, count, address, nbytes = meta
    storage = after.untyped_storage()
    if storage.data_ptr() != address or storage.nbytes() != nbytes:  # (set_, resize_: another storage)
        return None
    now, was = _as_int64(_raw(after, first, count)), _as_int64(_raw(kept, 0, count))
    differ = now != was
    if after.numel() and bool(differ.any()):
        size = after.element_size()
        pos = positions(tuple(after.shape), tuple(after.stride()), int(after.storage_offset()))
        inside = ((pos.reshape(-1, 1) * size + torch.arange(size, dtype=torch.int64)).reshape(-1)) - first
        inside = inside[(inside >= 0) & (inside < count)]
        differ[inside] = False
    if not bool(differ.any()):
        return None
    at = int(differ.nonzero()[0])
    return int(differ.sum()), first + at, int(was[at]), int(now[at])
