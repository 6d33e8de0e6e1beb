"""Run a call on a thread of its own, whose Python stack is a few frames deep, and hand back its
result or raise its exception.

Why: ``torch.manual_seed`` (which torch's OpInfo catalogue calls through ``wrapper_set_seed`` for
every sample of its random ops: dropout, bernoulli, ...) queues a lazy seed for CUDA, XPU and MTIA
when they are not initialized, and each queue records ``traceback.format_stack()`` of the caller:
three whole stacks, their source lines read through linecache, per call. Under pytest that stack
is some 70 frames deep, and the native-op survey's ~1,300 seeded calls spent ~2.8 s of its ~7 s
formatting it (torch 2.13, 2 cores). On a fresh thread the stack is the survey's own.

What the caller's thread holds in torch's thread-local state is carried over where it can change
an op's answer (grad mode) or where the ops run (the current CUDA device: ``device="cuda"`` means
the caller's, and a new thread starts on device 0); the survey enters no other mode and expects
none."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def call_on_a_short_stack(fn: Callable[[], T]) -> T:
    """``fn()``, run on a new thread; its exception, if any, re-raised here with its traceback."""
    grad = torch.is_grad_enabled()
    # (torch.cuda.current_device() would initialize CUDA where nothing has: asked only once it is)
    device = torch.cuda.current_device() if torch.cuda.is_initialized() else None
    box: dict[str, object] = {}

    def run() -> None:
        try:
            if device is not None:
                torch.cuda.set_device(device)
            with torch.set_grad_enabled(grad):
                box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, re-raised there
            box["error"] = exc

    # (daemon: a Ctrl-C in the caller's thread does not wait for the survey to end)
    worker = threading.Thread(target=run, name="fp8ref-short-stack", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
