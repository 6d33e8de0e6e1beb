"""Where a leaf's FP8 ops ran, for the module check's failure message: each op that reads or
writes float8, or is a scaled GEMM, as the chain of the team's frames that called it (innermost
first: ``call_site.call_chain``), the forward's and the backward's apart, so a failed gradient
names the backward's lines and a failed output the forward's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..trace.call_site import call_chain

__all__ = ["fp8_sites"]

_FLOAT8 = {getattr(torch, n) for n in dir(torch) if n.startswith("float8_")}
_SCALED = {
    getattr(torch.ops.aten, n).default for n in ("_scaled_mm", "_scaled_grouped_mm") if hasattr(torch.ops.aten, n)
}


class _Sites(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.chains: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        touched = tree_leaves((args, kwargs, out))
        if func in _SCALED or any(isinstance(t, torch.Tensor) and t.dtype in _FLOAT8 for t in touched):
            self.chains.append(call_chain(2))
        return out


def fp8_sites(forward: Callable[[], torch.Tensor], backward: Callable[[torch.Tensor], None]) -> tuple[list, list]:
    """The chains of ``forward()``'s FP8 ops and of ``backward(its output)``'s, each in first-run
    order without repeats."""
    with _Sites() as ran_forward:
        out = forward()
    with _Sites() as ran_backward:
        backward(out)
    return list(dict.fromkeys(ran_forward.chains)), list(dict.fromkeys(ran_backward.chains))
