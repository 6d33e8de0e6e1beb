"""torch's op catalogue (OpInfo, in torch's test tree) that is not installed reads ``missing``,
never the install's ``refused``: no call was declined (issue 52, item 6)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from fp8ref.harness.native import native_ops

_CATALOGUE = "torch.testing._internal.common_methods_invocations"


@pytest.fixture
def catalogue_not_installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    native_ops._op_db.cache_clear()
    monkeypatch.setitem(sys.modules, _CATALOGUE, None)  # (its import now raises ModuleNotFoundError)
    yield
    monkeypatch.undo()
    native_ops._op_db.cache_clear()  # (the next caller imports the real catalogue)


def test_a_torch_without_its_op_catalogue_reads_missing_not_refused(catalogue_not_installed):
    answer = native_ops.catalogue_refusal()
    assert answer is not None and answer.startswith("missing: "), answer
    assert _CATALOGUE in answer
    assert native_ops.catalogue() == {}
