"""The judge's reading of stored bytes (fp8ref/harness/judge/stored.py) and its movement verdict
(fp8ref/harness/judge/movement.py), held to bytes built by hand here: a storage is a Python
``bytearray`` of known bytes (``torch.frombuffer`` shares its memory), a view of it is made with
``as_strided``, and each expected byte is picked out of the bytearray by the strided-layout
arithmetic written out in the test (element ``(i, j)`` is storage element ``o + i s0 + j s1``).

Why a test may fail: a stride of 0 or a storage offset dropped from ``positions``; the element
size left out of a 2-byte dtype's bytes (its high byte lost, or its low one read twice); a
snapshot that shares memory with the original, keeps the whole of a large storage, or forgets
its layout; a write beside a view missed (or one inside it reported, or a 2-byte element's high
byte taken for outside); another storage (``resize_``, ``set_``) compared to the old one's
bytes; the movement judge's position tags taken from the view instead of its storage (a storage
offset lost), its inputs not told apart (``cat``, ``where``), a partial snapshot judged as if
whole, or a corrupted output byte passed."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.judge import stored
from fp8ref.harness.judge.movement import judge_movement
from fp8ref.harness.judge.stored import logical_bytes, partial, positions, snapshot, stored_codes, written_outside

E4M3 = torch.float8_e4m3fn
FLOAT8 = {E4M3}
# known bytes, none a NaN code of E4M3 (0x7f, 0xff), all distinct, so a wrong position shows
RAW = bytes([0x10 + 3 * i for i in range(24)])


def _storage(raw: bytes = RAW) -> tuple[bytearray, torch.Tensor]:
    """A bytearray and a uint8 tensor over the same memory (writes to one are seen by the other,
    with no kernel run)."""
    buf = bytearray(raw)
    return buf, torch.frombuffer(buf, dtype=torch.uint8)


def _f8(base: torch.Tensor, size: tuple, stride: tuple, offset: int) -> torch.Tensor:
    return base.view(E4M3).as_strided(size, stride, offset)


# --- positions -----------------------------------------------------------------------------------------
def test_positions_of_an_expand_repeat_the_storage_element():
    got = positions((2, 3), (0, 1), 4)
    assert got.dtype == torch.int64 and got.tolist() == [[4, 5, 6], [4, 5, 6]]


def test_positions_of_a_transpose_with_a_storage_offset():
    # element (i, j) at 5 + i * 1 + j * 3
    assert positions((3, 2), (1, 3), 5).tolist() == [[5, 8], [6, 9], [7, 10]]


def test_positions_of_a_0d_and_a_zero_size_tensor():
    zero_d = positions((), (), 7)
    assert zero_d.shape == () and int(zero_d) == 7
    empty = positions((0, 3), (3, 1), 2)
    assert tuple(empty.shape) == (0, 3) and empty.numel() == 0


# --- codes and bytes of non-contiguous views -----------------------------------------------------------
def test_stored_codes_of_a_strided_float8_view():
    _, base = _storage()
    x = _f8(base, (3, 2), (1, 4), 1)  # element (i, j) at 1 + i + 4 j
    want = [[RAW[1], RAW[5]], [RAW[2], RAW[6]], [RAW[3], RAW[7]]]
    assert stored_codes(x).tolist() == want
    assert logical_bytes(x) == bytes([RAW[1], RAW[5], RAW[2], RAW[6], RAW[3], RAW[7]])


def test_stored_codes_of_an_expanded_float8_view():
    _, base = _storage()
    x = _f8(base, (2, 3), (0, 2), 3)  # every row the storage elements 3, 5, 7
    assert stored_codes(x).tolist() == [[RAW[3], RAW[5], RAW[7]]] * 2


def test_logical_bytes_of_a_strided_bfloat16_view_keep_each_elements_two_bytes_in_order():
    _, base = _storage()
    y = base.view(torch.bfloat16).as_strided((2, 2), (1, 3), 2)  # elements 2, 5 / 3, 6 of 12
    want = RAW[4:6] + RAW[10:12] + RAW[6:8] + RAW[12:14]  # element p is bytes 2p, 2p + 1
    assert logical_bytes(y) == want


def test_logical_bytes_of_a_contiguous_view_deep_in_its_storage():
    _, base = _storage()
    assert logical_bytes(_f8(base, (5,), (1,), 9)) == RAW[9:14]
    assert logical_bytes(_f8(base, (0, 4), (4, 1), 9)) == b""


# --- snapshot ------------------------------------------------------------------------------------------
def test_a_snapshot_keeps_the_layout_and_bytes_and_not_later_writes():
    buf, base = _storage()
    x = _f8(base, (3, 2), (1, 4), 1)
    kept = snapshot(x)
    assert (kept.dtype, tuple(kept.shape), kept.stride(), kept.storage_offset()) == (E4M3, (3, 2), (1, 4), 1)
    assert not partial(kept)
    assert kept.untyped_storage().nbytes() == len(RAW)  # (a small storage: kept whole)
    before = bytes([RAW[1], RAW[5], RAW[2], RAW[6], RAW[3], RAW[7]])
    assert logical_bytes(kept) == before
    buf[5] ^= 0xFF  # the original's element (0, 1), written after the snapshot
    buf[20] ^= 0xFF  # and a byte outside its view
    assert logical_bytes(x) != before
    assert logical_bytes(kept) == before
    assert bytes(kept.untyped_storage())[20] == RAW[20]


def test_a_snapshot_of_a_large_storage_keeps_only_its_views_span(monkeypatch):
    monkeypatch.setattr(stored, "WHOLE_STORAGE_BYTES", 8)
    _, base = _storage()
    x = base.view(torch.bfloat16).as_strided((2, 2), (1, 3), 2)  # elements 2, 5 / 3, 6: span 2..6
    kept = snapshot(x)
    assert partial(kept)
    assert (kept.dtype, tuple(kept.shape), kept.stride()) == (torch.bfloat16, (2, 2), (1, 3))
    assert kept.untyped_storage().nbytes() == 5 * 2  # elements 2..6, not the storage's 12
    assert logical_bytes(kept) == RAW[4:6] + RAW[10:12] + RAW[6:8] + RAW[12:14]


def test_a_snapshot_of_a_zero_size_tensor_keeps_its_shape():
    _, base = _storage()
    kept = snapshot(_f8(base, (0, 3), (3, 1), 2))
    assert (kept.dtype, tuple(kept.shape)) == (E4M3, (0, 3))


# --- written_outside ------------------------------------------------------------------------------------
def test_a_byte_written_just_past_a_view_is_found():
    buf, base = _storage()
    x = _f8(base, (4,), (1,), 4)  # storage bytes 4..7
    kept = snapshot(x)
    buf[8] ^= 0xFF
    assert written_outside(x, kept) == (1, 8, RAW[8], RAW[8] ^ 0xFF)


def test_writes_inside_a_view_are_not_outside_it():
    buf, base = _storage()
    x = _f8(base, (4,), (1,), 4)
    kept = snapshot(x)
    buf[4] ^= 0xFF
    buf[7] ^= 0xFF
    assert written_outside(x, kept) is None
    buf[3] ^= 0x01  # (and one just before it, beside those inside: found alone)
    assert written_outside(x, kept) == (1, 3, RAW[3], RAW[3] ^ 0x01)


def test_a_gap_between_a_strided_views_elements_is_outside_it():
    buf, base = _storage()
    x = _f8(base, (2, 2), (1, 4), 0)  # storage bytes 0, 1, 4, 5
    kept = snapshot(x)
    buf[1] ^= 0xFF  # inside
    buf[2] ^= 0xFF  # between its elements
    assert written_outside(x, kept) == (1, 2, RAW[2], RAW[2] ^ 0xFF)


def test_both_bytes_of_a_2_byte_element_are_inside_its_view():
    buf, base = _storage()
    y = base.view(torch.bfloat16).as_strided((2,), (3,), 1)  # elements 1, 4: bytes 2, 3, 8, 9
    kept = snapshot(y)
    buf[3] ^= 0xFF
    buf[9] ^= 0xFF
    assert written_outside(y, kept) is None
    buf[10] ^= 0xFF
    assert written_outside(y, kept) == (1, 10, RAW[10], RAW[10] ^ 0xFF)


def test_another_storage_is_no_write_outside():
    """``resize_`` and ``set_`` give the tensor another storage: its bytes are not the kept ones'
    to compare (the answer is None, never a stray)."""
    x = torch.tensor(list(RAW[:8]), dtype=torch.uint8).view(E4M3)
    kept = snapshot(x)
    x.resize_(64)  # (a larger storage: another address and size)
    assert written_outside(x, kept) is None

    y = torch.tensor(list(RAW[:8]), dtype=torch.uint8).view(E4M3)[:4]
    kept = snapshot(y)
    other = torch.tensor([b ^ 0xFF for b in RAW[:8]], dtype=torch.uint8).view(E4M3)  # (every byte differs)
    y.set_(other.untyped_storage(), 0, (4,), (1,))
    assert written_outside(y, kept) is None


# --- judge_movement ------------------------------------------------------------------------------------
def _judge(op, args, name=""):
    return judge_movement(op, args, {}, op(*args), FLOAT8, name)


def test_a_transpose_of_a_view_deep_in_its_storage_is_judged_ok():
    _, base = _storage()
    x = _f8(base, (2, 3), (3, 1), 5)
    moved = _judge(torch.ops.aten.t.default, (x,))
    assert moved.status == "ok", moved


def test_as_strided_with_a_storage_offset_reaches_outside_its_input_view():
    """``as_strided`` reads the storage positions its arguments name, not the view's: a view of
    bytes 8.. given offset 2 reads bytes 2.. (position tags of the view alone would not)."""
    _, base = _storage()
    x = _f8(base, (4,), (1,), 8)
    op = torch.ops.aten.as_strided.default
    moved = _judge(op, (x, (2, 2), (1, 3), 2), "as_strided")
    assert moved.status == "ok", moved
    assert stored_codes(op(x, (2, 2), (1, 3), 2)).tolist() == [[RAW[2], RAW[5]], [RAW[3], RAW[6]]]


def test_index_select_with_repeated_indices_is_judged_ok():
    _, base = _storage()
    x = _f8(base, (3, 4), (1, 3), 2)  # (a transposed view: element (i, j) at 2 + i + 3 j)
    moved = _judge(torch.ops.aten.index_select.default, (x, 0, torch.tensor([2, 0, 2, 2])))
    assert moved.status == "ok", moved


def test_cat_of_two_inputs_and_where_of_two_are_judged_ok():
    _, base = _storage()
    _, other = _storage(bytes(b ^ 0x80 for b in RAW))  # (another storage: its positions name other bytes)
    a, b = _f8(base, (2, 3), (3, 1), 0), _f8(other, (2, 3), (1, 2), 12)
    assert _judge(torch.ops.aten.cat.default, ([a, b], 0)).status == "ok"
    pick = torch.tensor([[True, False, True], [False, False, True]])
    assert _judge(torch.ops.aten.where.self, (pick, a, b)).status == "ok"


def test_as_strided_of_a_partial_snapshot_is_unchecked_with_why(monkeypatch):
    """A snapshot that kept only its view's bytes cannot say what ``as_strided`` reads outside
    it: unchecked, never a pass or a false violation."""
    monkeypatch.setattr(stored, "WHOLE_STORAGE_BYTES", 4)
    _, base = _storage()
    x = _f8(base, (8,), (1,), 8)
    kept = snapshot(x)
    assert partial(kept)
    # (bytes 2, 3 of the storage; the kept buffer's own positions 2, 3 hold bytes 10, 11: judged
    # as if whole, the right answer would be a violation)
    op = torch.ops.aten.as_strided.default
    moved = judge_movement(op, (kept, (2,), (1,), 2), {}, op(x, (2,), (1,), 2), FLOAT8, "as_strided")
    assert moved.status == "unchecked" and moved.reason, moved


@pytest.mark.parametrize("at", [0, 3, 5])
def test_a_corrupted_output_byte_is_a_violation_naming_it(at):
    _, base = _storage()
    x = _f8(base, (3, 4), (1, 3), 2)
    index = torch.tensor([2, 0, 1])
    op = torch.ops.aten.index_select.default
    out = op(x, 0, index)
    # (element (r, j) of the output is x's (index[r], j), storage byte 2 + index[r] + 3 j)
    want = [[RAW[2 + int(i) + 3 * j] for j in range(4)] for i in index]
    assert stored_codes(out).tolist() == want
    raw = torch.empty(0, dtype=torch.uint8).set_(out.untyped_storage())
    for flat in (at, 11):  # (two wrong bytes: the first is named, both counted)
        row, col = divmod(flat, 4)
        raw[out.storage_offset() + row * out.stride(0) + col * out.stride(1)] = want[row][col] ^ 0x40
    moved = judge_movement(op, (x, 0, index), {}, out, FLOAT8)
    assert moved.status == "violation", moved
    row, col = divmod(at, 4)
    assert (moved.output, moved.index, moved.got, moved.want) == (0, (row, col), want[row][col] ^ 0x40, want[row][col])
    assert (moved.count, moved.numel, moved.dtype) == (2, 12, E4M3)
