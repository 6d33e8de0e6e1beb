"""The tiny models and batches the workloads train, from fixed seeds (no FP8 op runs here)."""

from __future__ import annotations

import torch

__all__ = ["SEED", "mlp", "batch"]

SEED = 0


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
    return torch.nn.Sequential(*layers)


def batch(
    step: int, rows: int = 32, cols: int = 64, outs: int = 32, dtype: torch.dtype = torch.bfloat16
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, targets)`` of step ``step``: ``rows`` x ``cols`` and ``rows`` x ``outs``."""
    gen = torch.Generator().manual_seed(SEED + 1 + step)
    return torch.randn(rows, cols, generator=gen).to(dtype), torch.randn(rows, outs, generator=gen).to(dtype)
