"""The casts under test: anything that turns a float32/bfloat16/float16 tensor into uint8 codes of
a format. torch's native cast (``x.to(torch.float8_*)``, optionally on another device) and
ml_dtypes' numpy cast ship here; torchao's narrow casts are in ``torchao_compat``. This is the
harness, not the reference (that is ``codec``), so calling the native cast here is the point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from ...reference.formats import FloatFormat, as_format

__all__ = ["Implementation", "torch_cast", "ml_dtypes_cast", "implementations"]


@dataclasses.dataclass(frozen=True)
class Implementation:
    name: str  # e.g. "torch-cpu", "ml_dtypes"
    version: str
    cast: Callable[[torch.Tensor], torch.Tensor]  # input tensor -> uint8 codes, same shape, on CPU

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def torch_cast(fmt: FloatFormat, device: str = "cpu") -> Implementation | None:
    """torch's native cast on ``device``; None if this torch has no such dtype."""
    fmt = as_format(fmt)
    dtype = fmt.torch_dtype()
    if dtype is None:
        return None

    def cast(x: torch.Tensor) -> torch.Tensor:
        return x.to(device).to(dtype).view(torch.uint8).cpu()

    return Implementation(f"torch-{torch.device(device).type}", torch.__version__, cast)


def ml_dtypes_cast(fmt: FloatFormat) -> Implementation | None:
    """ml_dtypes' numpy cast (a second, independent implementation); None if unavailable."""
    fmt = as_format(fmt)
    target = fmt.ml_dtype()
    if target is None:
        return None
    import ml_dtypes
    import numpy as np

    def cast(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.bfloat16:
            # ml_dtypes' own bfloat16 -> fp8 conversion, not via float32
            arr = x.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            arr = x.contiguous().numpy()
        with np.errstate(invalid="ignore", over="ignore"):
            return torch.from_numpy(arr.astype(target).view(np.uint8).copy())

    return Implementation("ml_dtypes", ml_dtypes.__version__, cast)


def implementations(fmt: FloatFormat, devices: tuple[str, ...] = ("cpu",)) -> list[Implementation]:
    """Every implementation of ``fmt`` available on this install."""
    found = [torch_cast(fmt, d) for d in devices] + [ml_dtypes_cast(fmt)]
    return [i for i in found if i is not None]
