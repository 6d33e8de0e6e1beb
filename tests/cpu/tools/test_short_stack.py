"""The native-op survey runs on a stack of its own (fp8ref/harness/native/short_stack.py).

Why it may fail: ``torch.manual_seed``, which torch's op catalogue calls for every sample of its
random ops, formats the caller's whole stack three times per call; a survey run on the caller's
stack (under pytest some 40 frames) paid that ~1,300 times. These tests hold the survey to a short
stack and the helper to what a direct call gives: the value, the exception, the grad mode."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

import pytest
import torch

from fp8ref.harness.native import native_ops
from fp8ref.harness.native.short_stack import call_on_a_short_stack

T = TypeVar("T")
SHORT = 10  # frames: the thread's own few, far below pytest's ~40 plus the caller's


def _depth() -> int:
    frame: FrameType | None = sys._getframe()
    n = 0
    while frame is not None:
        n, frame = n + 1, frame.f_back
    return n


def _nested(levels: int, fn: Callable[[], T]) -> T:
    return fn() if levels == 0 else _nested(levels - 1, fn)


def test_the_support_matrix_is_found_on_a_short_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def survey(device: str) -> dict:
        seen.append(_depth())
        return {}

    monkeypatch.setattr(native_ops, "_support_matrix", survey)
    # (__wrapped__: the uncached survey, so the process's real matrix is neither used nor replaced)
    assert _nested(50, lambda: native_ops._cached_matrix.__wrapped__("cpu")) == {}
    assert seen and seen[0] <= SHORT, f"the survey ran {seen[0]} frames deep"


def test_the_helper_returns_the_value_from_a_short_stack() -> None:
    depth, value = _nested(50, lambda: call_on_a_short_stack(lambda: (_depth(), "value")))
    assert depth <= SHORT and value == "value"


def test_the_helper_raises_the_calls_own_exception() -> None:
    class Planted(Exception):
        pass

    def boom() -> None:
        raise Planted("planted")

    with pytest.raises(Planted, match="planted"):
        call_on_a_short_stack(boom)


@pytest.mark.parametrize("grad", [True, False])
def test_the_helper_keeps_the_callers_grad_mode(grad: bool) -> None:
    with torch.set_grad_enabled(grad):
        assert call_on_a_short_stack(torch.is_grad_enabled) is grad


def test_the_callers_cuda_device_is_the_threads(monkeypatch):
    """A new thread starts on CUDA device 0: ``device="cuda"`` after ``torch.cuda.set_device(k)``
    would survey device 0 (stand-ins here: no GPU needed, none initialized for real)."""
    import threading

    import torch

    from fp8ref.harness.native.short_stack import call_on_a_short_stack

    set_on: list = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: set_on.append((d, threading.current_thread().name)))
    assert call_on_a_short_stack(lambda: threading.current_thread().name) == "fp8ref-short-stack"
    assert set_on == [(3, "fp8ref-short-stack")]
