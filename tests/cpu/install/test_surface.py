"""The install's FP8 API surface (fp8ref/harness/native/surface.py), pinned in the profile
(``surface.*``), and what of it the definition or the promotion lattice decides, asserted: the
promotion table is symmetric and never promotes a float8 dtype to one that cannot hold its
values; a + b of a float8 tensor with another dtype, where it runs, gives the table's dtype and
the exact sum. Why the pinned keys may differ: a release that lets float8 promote (today every
pair is refused), changes what a Python scalar does, or changes a scaled GEMM's arguments."""

import pytest
import torch

from fp8ref.harness.native.surface import OTHERS, mixed_add, promotion
from fp8ref.harness.stack import install
from fp8ref.harness.stack.probes import float8_formats

FORMATS = {f.name: f for f in float8_formats()}


def test_the_promotion_table_is_symmetric_and_never_narrows_a_float8_dtype():
    table = promotion()
    bad = []
    for key, answer in table.items():
        _, _, a, b = key.split(".")
        back = table.get(f"surface.promote.{b}.{a}")
        refused = answer.startswith("refused"), back is not None and back.startswith("refused")
        if back is not None and back != answer and refused != (True, True):  # (a refusal names the pair in order)
            bad.append(f"{a} with {b}: {answer}, but {b} with {a}: {back}")
        if not answer.startswith("refused"):
            result = getattr(torch, answer)
            fp8 = FORMATS[a].torch_dtype()
            if result.is_floating_point and torch.finfo(result).max < torch.finfo(fp8).max:
                bad.append(f"{a} with {b} promotes to {answer}, which cannot hold {a}'s max")
    assert not bad, f"{install.versions_line()}: " + "; ".join(bad[:6])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_mixed_addition_follows_the_promotion_table_and_adds_exactly(fmt):
    words = {other: mixed_add(FORMATS[fmt], dtype) for other, dtype in OTHERS.items() if other != "complex64"}
    bad = {o: w for o, w in words.items() if w.startswith("gives") or "differ" in w}
    assert not bad, f"{install.versions_line()}, {fmt}: {bad}"
