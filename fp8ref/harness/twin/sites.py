"""Where a leaf's FP8 ops ran, for the module check's failure message: the ops the tracer records
(each that reads or writes float8, or takes a float8 dtype, and each scaled GEMM), each named by
the chain of the team's frames that called it (innermost first: ``call_site.call_chain``), the
forward's and the backward's apart, so a failed gradient names the backward's lines and a failed
output the forward's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..trace.call_site import call_chain
from ..trace.op_checks import SCALED_GEMMS, touches_float8

__all__ = ["fp8_sites"]


class _Sites(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.chains: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        # (the tracer's rule for what it records: trace/recorder.py)
        if func.overloadpacket.__name__ in SCALED_GEMMS or touches_float8((args, kwargs)) or touches_float8(out):
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
