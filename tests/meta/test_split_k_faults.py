"""The accumulator probes (fp8ref/harness/gemm/gemm_probes.py) against a stand-in ``_scaled_mm``
that splits K the way a GEMM library may for a small output: the copy of the probe it splits
sums its two halves apart and adds them in float32, which reads like promotion. A probe of one
copy, all of it split, is fooled (the fault this guards against); laid out in several copies, the
probe answers what an unsplit copy shows, the accumulator's own width and promotion interval."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.gemm.gemm_probes import accumulator_bits, promotion_interval
from fp8ref.harness.gemm.scaled_mm_regressions import stand_in

HOPPER_LIKE_FAST = {"keep_bits": 13}  # about 13 bits, never promoted: Hopper's fast accumulation


def split_k_in_first_copy(inner: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``inner`` for every output row but the first copy's 32, which it computes as two GEMMs over
    the halves of K, their results added in float64 (exact here, as float32 would be)."""

    def mm(A, B, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
        whole = inner(A, B, scale_a, scale_b, out_dtype=torch.float64, use_fast_accum=use_fast_accum)
        h = A.shape[1] // 2
        parts = [
            inner(A[:32, ks], B[ks, :], scale_a, scale_b, out_dtype=torch.float64, use_fast_accum=use_fast_accum)
            for ks in (slice(0, h), slice(h, None))
        ]
        whole[:32] = parts[0] + parts[1]
        return whole.to(out_dtype)

    return mm


def test_a_split_accumulator_is_taken_for_promotion_in_one_copy_and_not_in_several(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", split_k_in_first_copy(stand_in(**HOPPER_LIKE_FAST)))
    # one copy, split: the products 1024 apart land in different halves and read as promoted
    assert accumulator_bits("cpu", True, "across", replicas=1) == 23
    assert promotion_interval("cpu", True, replicas=1) != "none up to 1024"
    # two copies per side, one split: the least over the copies is the unsplit accumulator's answer
    assert accumulator_bits("cpu", True, "across", replicas=2) == 13
    assert promotion_interval("cpu", True, replicas=2) == "none up to 1024"


@pytest.mark.parametrize("span", ["within", "across"])
def test_copies_change_nothing_without_a_split(span, monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", stand_in(**HOPPER_LIKE_FAST))
    assert accumulator_bits("cpu", True, span, replicas=1) == accumulator_bits("cpu", True, span, replicas=2) == 13


def test_replicas_must_be_a_positive_int():
    with pytest.raises(ValueError, match="replicas: expected a positive int"):
        accumulator_bits("cpu", replicas=0)
