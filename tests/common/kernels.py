"""A stand-in for one of torch's kernels, for the length of a block: the meta tests' way of
breaking the install (a CPU kernel of one aten op replaced through ``torch.library``)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator

import torch

__all__ = ["cpu_kernel_replaced"]


@contextlib.contextmanager
def cpu_kernel_replaced(op: str, kernel: Callable[..., torch.Tensor]) -> Iterator[None]:
    """aten's ``op`` (an overload name such as ``"where.self"``) on the CPU replaced by
    ``kernel`` for the block; torch's own kernel back after it."""
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # (torch warns that a kernel is overridden: that is the point)
        warnings.simplefilter("ignore", UserWarning)
        lib.impl(op, kernel, "CPU")
    try:
        yield
    finally:
        lib._destroy()
