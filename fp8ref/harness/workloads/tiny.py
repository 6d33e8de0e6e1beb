"""The tiny models and batches the workloads train, from fixed seeds (no FP8 op runs here), on
the device a workload runs on (``on``: the CPU unless a CUDA twin runs; ``device``). They are
drawn on the CPU from generators of their own and then moved, so a CUDA twin trains the CPU
workload's very weights and batches."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch

from ..stack.install import device_kind

__all__ = ["SEED", "mlp", "batch", "on", "device"]

SEED = 0
_DEVICE = contextvars.ContextVar("fp8ref_workload_device", default="cpu")


def device() -> str:
    """The device the running workload builds its model, batches and tensors on."""
    return _DEVICE.get()


@contextlib.contextmanager
def on(where: str) -> Iterator[None]:
    """Workloads run inside build on ``where`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``)."""
    device_kind(where)  # (validates, naming the argument)
    token = _DEVICE.set(where)
    try:
        yield
    finally:
        _DEVICE.reset(token)


def mlp(dims: tuple[int, ...] = (64, 64, 32), dtype: torch.dtype = torch.bfloat16) -> torch.nn.Sequential:
    """Linear layers without bias between ``dims``, ReLU between them, seeded. The weights are
    drawn in float32 from a generator of their own (uniform in +-1/sqrt(fan_in), nn.Linear's default
    bound) and then rounded to ``dtype``: drawing straight in bfloat16, as ``nn.Linear(dtype=...)``
    does, gave other weights on torch 2.9.1 than on 2.13, and every trace digest with them."""
    torch.manual_seed(SEED)  # (for anything else the program draws)
    gen = torch.Generator().manual_seed(SEED)
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
        layers += [torch.nn.ReLU()] if i else []
        linear = torch.nn.Linear(fan_in, fan_out, bias=False, dtype=dtype)
        bound = fan_in**-0.5
        with torch.no_grad():
            linear.weight.copy_(((torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * bound).to(dtype))
        layers.append(linear)
    return torch.nn.Sequential(*layers).to(device())


def batch(
    step: int, rows: int = 32, cols: int = 64, outs: int = 32, dtype: torch.dtype = torch.bfloat16
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, targets)`` of step ``step``: ``rows`` x ``cols`` and ``rows`` x ``outs``."""
    gen = torch.Generator().manual_seed(SEED + 1 + step)
    x, target = torch.randn(rows, cols, generator=gen), torch.randn(rows, outs, generator=gen)
    return x.to(dtype).to(device()), target.to(dtype).to(device())
