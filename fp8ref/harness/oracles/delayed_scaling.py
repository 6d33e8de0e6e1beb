"""Delayed scaling held to an oracle computed from the window itself (TransformerEngine's rule,
``reference.delayed.te_scale``, applied step by step): for fp8ref's ``DelayedScaling`` and the
broken stand-ins of tests/meta."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...reference.delayed import AmaxAlgo, te_scale
from ...reference.formats import FloatFormat


def delayed_mismatch(
    make: Callable[[], Any],
    amaxes: list[float],
    fmt: FloatFormat,
    history_len: int,
    algo: AmaxAlgo | str,
    margin: int = 0,
) -> str | None:
    """A delayed-scaling implementation (``make()`` returns an object with ``update(amax)`` and
    ``scale``) fed ``amaxes`` one step at a time, against an oracle computed here from the
    window itself: after step t the scale is TE's rule applied to the max of the last
    ``history_len`` amaxes (``max``) or to amax t (``most_recent``), the previous scale kept when
    that is 0 or not finite."""
    impl = make()
    previous = torch.ones(())
    for t, a in enumerate(amaxes):
        impl.update(a)
        window = amaxes[max(0, t + 1 - history_len) : t + 1]
        reduced = max(window) if AmaxAlgo(algo) == AmaxAlgo.MAX else window[-1]
        want = te_scale(torch.tensor(float(reduced)), previous, fmt, margin)
        got = torch.as_tensor(impl.scale, dtype=torch.float32).reshape(())
        if not torch.equal(got.view(torch.int32), want.reshape(()).view(torch.int32)):
            return f"step {t} (amax {a!r}, window {window}): scale {got.item()!r}, expected {want.item()!r}"
        previous = want
    return None
