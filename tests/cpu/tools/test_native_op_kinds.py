"""The kinds table (fp8ref/harness/native/native_op_kinds.py): an op that combines values is
arithmetic, never movement (a movement check compares bytes with the uint8 view, which would hold
an addition to a byte-wise answer no float8 sum has)."""

from __future__ import annotations

import torch

from fp8ref.harness.native.native_op_kinds import KIND, SAMPLE_KIND


class _Sample:
    """A stand-in for native_ops.Sample: the float8 way's (input, args, kwargs)."""

    def __init__(self, args: tuple, kwargs: dict):
        self.ways = {"float8": (torch.zeros(4), args, kwargs)}


def _kind(op: str, args: tuple, kwargs: dict) -> str:
    kind = KIND[op]
    return SAMPLE_KIND.get(op, lambda s, k: k)(_Sample(args, kwargs), kind)


def test_index_add_is_arithmetic_not_movement():
    once = (0, torch.tensor([0, 2]), torch.ones(2))
    twice = (0, torch.tensor([1, 1]), torch.ones(2))
    assert KIND["index_add"] != "movement"
    assert _kind("index_add", once, {"alpha": 2}) == "values"  # one addition per element: rounded once
    assert _kind("index_add", twice, {}) == "unchecked"  # a repeated index: a reduction in torch's order


def test_scatter_with_reduce_is_arithmetic_not_movement():
    args = (0, torch.tensor([0, 1]), torch.ones(2))
    assert _kind("scatter", args, {}) == "movement"  # moves codes
    assert _kind("scatter", args, {"reduce": "add"}) == "unchecked"
    assert _kind("scatter", args, {"reduce": "multiply"}) == "unchecked"
