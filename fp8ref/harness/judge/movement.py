"""A movement of float8 codes (a view, a copy, a gather, a concatenation, a scatter) judged by
which input byte each output byte must be, never by the install's one-byte kernels.

The op's meaning is read off the op run on *position tags*: every float8 input is replaced by an
int64 tensor of its layout (shape, strides, storage offset) whose storage holds, at each
position, the input's number and that position. Run on those (on the CPU, with the other
arguments moved there), the op's output says, element by element, which input and which
storage position each output element must copy. The want is then that input's stored byte there
(``stored.codes_at``) and the got is the output's stored byte (``stored.stored_codes``): both read
from memory by index arithmetic. The tags run int64 kernels, which share no code path with the
one-byte kernels under check (a fault in a one-byte ``clone``, ``index_select`` or ``where`` is
caught at that op, and a view before it, read by its strides, stays clean).

An element whose tag is 0 is a zero the op wrote of its own (padding): its byte must be 0x00.
Any other element whose tag names no input (the op computed a value) means the op is no movement
on these arguments: the call is left unchecked, with why."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..stack.refusals import first_words, survey
from .stored import bounds, codes_at, partial, readable, stored_codes

__all__ = ["Moved", "judge_movement", "unravel", "FULL_STORAGE_OPS", "TAG_LIMIT"]

_SHIFT = 40  # tag = (input number + 1) << 40 | storage position
_POSITION = (1 << _SHIFT) - 1
# ops that read a storage position named by an argument, not by the view: their tags cover the
# whole storage (a view of one deeper in it reaches positions outside the view)
FULL_STORAGE_OPS = frozenset("as_strided as_strided_ as_strided_copy as_strided_scatter set_ set".split())
# the most codes one input's tags may span: 8 bytes a code (128 MiB); a gather from a larger
# table (a float8 embedding, a KV cache) is left unchecked, with why
TAG_LIMIT = 1 << 24


@dataclasses.dataclass
class Moved:
    """The judgement of one call: ``status`` ok, violation or unchecked; for a violation the first
    differing element (``output``, ``index``, ``got``, ``want`` codes) and how many differ."""

    status: str = "ok"
    reason: str = ""
    problem: str = ""
    output: int = 0
    index: tuple[int, ...] = ()
    got: int = 0
    want: int = 0
    count: int = 0
    numel: int = 0
    dtype: torch.dtype | None = None


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of element ``flat`` (in logical order) of a tensor of ``shape``."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size) if size else (flat, 0)
        index.append(i)
    return tuple(reversed(index))


class _Tags:
    """The float8 inputs of one call and their position tags."""

    def __init__(self, float8: Collection[torch.dtype], full_storage: bool) -> None:
        self.float8, self.full = float8, full_storage
        self.inputs: list[torch.Tensor] = []
        self.refused = ""

    def tag(self, v: Any) -> Any:
        if isinstance(v, torch.dtype) and v in self.float8:
            return torch.int64
        if isinstance(v, torch.device):
            return torch.device("cpu")
        if not isinstance(v, torch.Tensor):
            return v
        if v.dtype not in self.float8:
            return v.cpu()
        if not readable(v):
            self.refused = f"a {type(v).__name__} holds no bytes to read"
            return v
        number = len(self.inputs) + 1
        self.inputs.append(v)
        storage = v.untyped_storage().nbytes() // v.element_size()
        if self.full:
            if partial(v):
                self.refused = "kept as the bytes its view reaches (a large storage): a storage position names others"
                return v
            lo, hi = 0, max(storage - 1, 0)
        elif v.numel():
            lo, hi = bounds(v)
        else:
            lo = hi = int(v.storage_offset())
        if hi - lo + 1 > TAG_LIMIT:  # (refused before any tag is made: 8 bytes a code)
            self.refused = (
                f"a span of {hi - lo + 1} codes to tag: more than fp8ref tags ({TAG_LIMIT}, {TAG_LIMIT >> 17} MiB)"
            )
            return v
        base = torch.arange(lo, hi + 1, dtype=torch.int64) + (number << _SHIFT)
        return base.as_strided(tuple(v.shape), tuple(v.stride()), v.storage_offset() - lo)


def _leaves(value: Any) -> list[Any]:
    return tree_flatten(value)[0]


def judge_movement(
    op: Callable[..., Any], args: tuple, kwargs: dict, out: Any, float8: Collection[torch.dtype], name: str = ""
) -> Moved:
    """``op(*args, **kwargs) -> out`` held as a movement: each float8 output's stored bytes
    against the bytes its position tags name. ``args``/``kwargs`` as the op found them (a snapshot
    of what it writes to); ``float8``: the dtypes whose tensors hold codes; ``name``: the op's name
    in the kinds table (``as_strided`` and the like tag whole storages)."""
    if any(isinstance(v, float) for v in _leaves((args, kwargs))):
        return Moved("unchecked", "a Python float among its arguments: no code holds it")
    if not any(isinstance(g, torch.Tensor) and g.dtype in float8 for g in _leaves(out)):  # (nothing judged: no pass)
        return Moved("unchecked", "no float8 output: the codes left float8 (a view as another dtype)")
    tags = _Tags(float8, name.split(".")[0] in FULL_STORAGE_OPS)
    tagged_args, tagged_kwargs = tree_map(tags.tag, args), tree_map(tags.tag, kwargs)
    if tags.refused:
        return Moved("unchecked", tags.refused)
    ok, ref = survey(lambda: op(*tagged_args, **tagged_kwargs))
    if not ok:
        return Moved("unchecked", f"the position tags refused it ({first_words(ref, 120)})")
    got_leaves, ref_leaves = _leaves(out), _leaves(ref)
    if len(got_leaves) != len(ref_leaves):
        return Moved("violation", problem=f"{len(got_leaves)} outputs, the position tags' {len(ref_leaves)}")
    for j, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        if not (isinstance(g, torch.Tensor) and g.dtype in float8):
            if isinstance(r, torch.Tensor) and r.dtype == torch.int64 and isinstance(g, torch.Tensor):
                return Moved("violation", problem=f"output {j}: {g.dtype}, a movement of float8 codes gives float8")
            continue  # (a shape, a count: not codes)
        if not isinstance(r, torch.Tensor) or r.dtype != torch.int64 or tuple(r.shape) != tuple(g.shape):
            what = f"{r.dtype}{list(r.shape)}" if isinstance(r, torch.Tensor) else repr(r)
            return Moved("violation", problem=f"output {j}: {g.dtype}{list(g.shape)}, the position tags give {what}")
        if not readable(g):
            return Moved("unchecked", f"output {j}: a {type(g).__name__} holds no bytes to read")
        r = r.contiguous()  # (int64: the tags' own copy)
        number, pos = r >> _SHIFT, r & _POSITION
        # (a tag of 0: the op wrote a zero of its own there, padding as _chunk_cat pads; a float8
        # zero is the all-zero byte, +0 in every format that has one: want 0x00)
        if bool(((r != 0) & ((number < 1) | (number > len(tags.inputs)))).any()):
            return Moved("unchecked", f"output {j}: elements no input gives (the op writes values of its own here)")
        want = torch.zeros(r.shape, dtype=torch.int64)
        for i, source in enumerate(tags.inputs, start=1):
            mine = number == i
            if bool(mine.any()):
                want[mine] = codes_at(source, pos[mine])
        got = stored_codes(g)
        bad = (got != want).reshape(-1)
        if bool(bad.any()):
            first = int(bad.nonzero()[0])
            return Moved(
                "violation",
                output=j,
                index=unravel(first, tuple(g.shape)),
                got=int(got.reshape(-1)[first]),
                want=int(want.reshape(-1)[first]),
                count=int(bad.sum()),
                numel=g.numel(),
                dtype=g.dtype,
            )
    return Moved()
