"""Grouped GEMMs of mixture-of-experts layers, from their definition: the tokens (rows of ``a``,
sorted by expert) split into groups by ``offs`` (each group's end row; torch's ``_grouped_mm``
convention), group g multiplied by expert g's weight. Forward ``out_g = a_g @ b[g]``; the input
gradient ``da_g = grad_g @ b[g]^T``; the weight gradient ``db[g] = a_g^T @ grad_g`` (zero for an
empty group). Results are exact (float64 products of the operands' values).

MX operands (OCP MX v1.0, E4M3 elements, blocks of 32 along the contraction dim, ``scaling.mx``):
every block lies inside one expert's data: along K for the forward and input gradient (within a
token's row, within an expert's weight column); along the tokens for the weight gradient, where
the blocks restart at every group's first token and a group's last block holds its remaining
tokens (zeros fill it, which change no amax): a scale is never shared by two experts.

Torch and the standard library only.
"""

from __future__ import annotations

import torch

from .formats import E4M3FN
from .quantize import quantize
from .scaling import MxMode, mx
from .validate import tensor

__all__ = ["group_bounds", "grouped_mm", "grouped_mm_backward", "mx_operand", "mx_tokens_operand"]


def group_bounds(offs: torch.Tensor, rows: int) -> list[tuple[int, int]]:
    """(start, end) rows of each group: ``offs`` non-decreasing integer end rows, the last at most
    ``rows`` (rows past it belong to no group)."""
    tensor(offs, "offs")
    if offs.dtype.is_floating_point or offs.dim() != 1:
        raise ValueError(f"offs: expected a 1-D integer tensor of group end rows, got {offs.dtype} {tuple(offs.shape)}")
    ends = [int(v) for v in offs.tolist()]
    if any(b < a for a, b in zip([0, *ends], ends)) or (ends and (ends[0] < 0 or ends[-1] > rows)):
        raise ValueError(f"offs: expected non-decreasing end rows within 0..{rows}, got {ends}")
    return list(zip([0, *ends[:-1]], ends))


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``a`` (M, K) by the experts' ``b`` (E, K, N): (M, N), float64; rows in no group are zero."""
    tensor(a, "a", floating=True)
    tensor(b, "b", floating=True)
    bounds = group_bounds(offs, a.shape[0])
    if b.dim() != 3 or b.shape[0] != len(bounds) or b.shape[1] != a.shape[1]:
        raise ValueError(f"b: expected (experts={len(bounds)}, K={a.shape[1]}, N), got {tuple(b.shape)}")
    out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64)
    for g, (s, e) in enumerate(bounds):
        out[s:e] = a[s:e].double() @ b[g].double()
    return out


def grouped_mm_backward(
    a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input gradient (M, K), weight gradient (E, K, N)) of ``grouped_mm`` for the output
    gradient ``grad`` (M, N), float64."""
    bounds = group_bounds(offs, a.shape[0])
    da = torch.zeros(a.shape, dtype=torch.float64)
    db = torch.zeros(b.shape, dtype=torch.float64)
    for g, (s, e) in enumerate(bounds):
        da[s:e] = grad[s:e].double() @ b[g].double().t()
        db[g] = a[s:e].double().t() @ grad[s:e].double()
    return da, db


def mx_operand(x: torch.Tensor, mode: MxMode | str = MxMode.RCEIL, dim: int = -1) -> torch.Tensor:
    """``x``'s values as MX E4M3 in blocks of 32 along ``dim`` (float32): the operand a grouped
    GEMM multiplies."""
    moved = x.float().movedim(dim, -1).contiguous()
    return quantize(moved, E4M3FN, mx(32, mode)).dequantize(torch.float32).movedim(-1, dim)


def mx_tokens_operand(x: torch.Tensor, offs: torch.Tensor, mode: MxMode | str = MxMode.RCEIL) -> torch.Tensor:
    """``x`` (M, C) as MX E4M3 in blocks of 32 along the tokens (dim 0) that restart at every
    group (module docstring): the weight gradient's operands."""
    out = torch.zeros(x.shape, dtype=torch.float32)
    for s, e in group_bounds(offs, x.shape[0]):
        if e == s:
            continue
        part = x[s:e].float()
        padded = torch.cat([part, part.new_zeros(-(e - s) % 32, x.shape[1])])
        out[s:e] = mx_operand(padded, mode, dim=0)[: e - s]
    return out
