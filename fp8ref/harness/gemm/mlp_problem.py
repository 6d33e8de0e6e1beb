"""A small training scenario: a 2-layer MLP regression, trained in float32 or with every matmul an
emulated FP8 linear. fp8_parity.py's smoke check trained it; the behaviour profile pins its loss and
a smoke test bounds FP8's loss gap on it. Harness, not reference: it only uses ``fp8ref.reference.emulate``."""

from __future__ import annotations

import torch

from ...reference.emulate import fp8_linear

__all__ = ["mlp_regression_problem", "train_mlp"]


def mlp_regression_problem() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A regression task and initial weights (fixed seeds): X (512, 32), Y = tanh(X A^T) (512, 16),
    W1 (64, 32), W2 (16, 64)."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(512, 32, generator=gen)
    Y = torch.tanh(X @ (torch.randn(16, 32, generator=gen) / 6).T)
    gen = torch.Generator().manual_seed(1)
    return X, Y, torch.randn(64, 32, generator=gen) / 6, torch.randn(16, 64, generator=gen) / 8


def train_mlp(fp8: bool, steps: int = 300) -> list[float]:
    """Train the 2-layer MLP with AdamW (fp32 master weights and optimizer state) and
    return the loss at every step. ``fp8``: every matmul is ``fp8_linear`` under torchao's
    tensorwise recipe (E4M3 input and weight, E5M2 output gradient); else plain fp32."""
    X, Y, W1, W2 = mlp_regression_problem()
    W1, W2 = W1.requires_grad_(), W2.requires_grad_()
    opt = torch.optim.AdamW([W1, W2], lr=3e-3)
    mm = (lambda inp, w: fp8_linear(inp, w, recipe="tensorwise")) if fp8 else (lambda inp, w: inp @ w.T)
    losses = []
    for _ in range(steps):
        loss = ((mm(torch.relu(mm(X, W1)), W2) - Y) ** 2).mean()
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses
