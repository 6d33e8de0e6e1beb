"""The kinds table (fp8ref/harness/native/native_op_kinds.py): an op that combines values is
arithmetic, never movement (a movement check compares bytes with the uint8 view, which would hold
an addition to a byte-wise answer no float8 sum has)."""

from __future__ import annotations

import torch

from fp8ref.harness.native.native_op_kinds import KIND, SAMPLE_KIND


class _Sample:
    """A stand-in for native_ops.Sample: the float8 way's (input, args, kwargs)."""

    def __init__(self, args: tuple, kwargs: dict):
        self.ways = {"float8": (torch.zeros(4).to(torch.float8_e4m3fn), args, kwargs)}


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


def test_a_value_written_into_float8_is_written_not_moved():
    """index_fill, scatter's value and where's other: a float8 tensor's codes are moved; a Python
    number or a wider floating tensor is a value cast into the format (on the uint8 view the
    number 1 lands as the byte 0x01, and a float32 0-d tensor promotes where's result)."""
    index = torch.tensor([0, 2])
    codes = torch.ones(()).to(torch.float8_e4m3fn)
    assert _kind("index_fill", (0, index, codes), {}) == "movement"
    assert _kind("index_fill", (0, index, 1), {}) == "written"
    assert _kind("index_fill", (0, index, torch.tensor(1.5)), {}) == "written"
    assert _kind("scatter", (0, index, torch.ones(2).to(torch.float8_e4m3fn)), {}) == "movement"
    assert _kind("scatter", (0, index, 1.5), {}) == "written"
    assert _kind("scatter", (0, index, 1.5), {"reduce": "add"}) == "unchecked"
    cond = torch.tensor([True, False])
    assert _kind("where", (cond, torch.zeros(2).to(torch.float8_e4m3fn)), {}) == "movement"
    assert _kind("where", (cond, torch.tensor(0.0)), {}) == "written"
    assert _kind("where", (cond, torch.tensor(0.0, dtype=torch.bfloat16)), {}) == "written"
