"""Grouped GEMMs (mixture-of-experts) against fp8ref's reference (fp8ref/reference/grouped.py),
forward and backward, shared by tests/cpu/install/test_grouped_gemm.py, its CUDA twin and
tests/meta. Each check returns ``(refusal, problem)``: the install refusing the path (the test
skips, naming it), or a line saying what is outside its bound; both None when it conforms.

Groups (tokens per expert): ``aligned`` 32, 0, 64, 32 (an empty expert); ``ragged`` 16, 0, 24, 40
(an empty expert, a group not a multiple of 16 or 32, the last group ending the tensor).

Bounds, per element, u = 2^-8 (a bfloat16 output rounding), m = sum |a||b| over the contraction
(length k) of the operands the GEMM multiplies, b_acc the device's accumulation bound (float32's
(k + 1) 2^-24 on the CPU; on a GPU at least the least documented FP8 accumulator's,
``documented_accumulator.gemm_accumulation``):
exact operands (bfloat16 or MX values, which bfloat16 holds): |got - ref| <= u |ref| + b_acc m.
FP8 rowwise, whose kernels compute their own scales: the same plus the E4M3 rounding of both
operands, 2 x 2^-4 m + 2^-8 m, and their subnormal error (at most 2^-10 / 448 of m).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...reference import grouped as ref
from ..stack.checked import Checked
from . import grouped
from .documented_accumulator import gemm_accumulation

GROUPS = {"aligned": (32, 0, 64, 32), "ragged": (16, 0, 24, 40)}
GROUPS_MAX = max(max(g) for g in GROUPS.values())  # (the longest weight-gradient contraction)
K, N = 64, 96
Operands = tuple[torch.Tensor, torch.Tensor]


def problem(groups: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, b, offs, output gradient) in bfloat16 for ``GROUPS[groups]``; each expert's weight, and
    each expert's tokens and their gradients, of a magnitude of their own (tokens 2^(3g) apart), so
    a token multiplied by another expert's weight shows, and so does a scale two experts share."""
    sizes = torch.tensor(GROUPS[groups])
    offs = sizes.cumsum(0).to(torch.int32)
    rows = int(offs[-1])
    gen = torch.Generator().manual_seed(seed)
    per_token = torch.exp2(3.0 * torch.arange(len(sizes))).repeat_interleave(sizes).reshape(-1, 1)
    a = (torch.randn(rows, K, generator=gen) * per_token).to(torch.bfloat16)
    magnitude = torch.tensor([0.5, 1.0, 2.0, 4.0]).reshape(-1, 1, 1)
    b = (torch.randn(len(sizes), K, N, generator=gen) * magnitude * 0.1).to(torch.bfloat16)
    grad = (torch.randn(rows, N, generator=gen) / per_token).to(torch.bfloat16)
    return a, b, offs, grad


def run(
    fn: Callable[..., torch.Tensor],
    a: torch.Tensor,
    b: torch.Tensor,
    offs: torch.Tensor,
    grad: torch.Tensor,
    device: str,
) -> tuple[dict[str, torch.Tensor] | None, str | None]:
    """``fn`` forward and backward on ``device``: ({output, grad_a, grad_b}, None), or (None,
    refusal) when the install refuses the path on groups of these sizes (asked once with the
    smallest call, ``grouped.refusal``). The step itself runs unguarded: its errors fail."""
    sizes = tuple(int(n) for n in torch.diff(offs.long(), prepend=torch.zeros(1, dtype=torch.long)))
    refused = grouped.refusal(fn, sizes, device)
    if refused is not None:
        return None, refused
    ad, bd = a.to(device).requires_grad_(), b.to(device).requires_grad_()
    out = fn(ad, bd, offs.to(device))
    out.backward(grad.to(device))
    assert ad.grad is not None and bd.grad is not None
    return {"output": out.detach().cpu(), "grad_a": ad.grad.cpu(), "grad_b": bd.grad.cpu()}, None


def _compare(
    got: dict[str, torch.Tensor],
    offs: torch.Tensor,
    forward: Operands,
    dgrad: Operands,
    wgrad: Operands,
    slack: Callable[[torch.Tensor, int], torch.Tensor],
    what: str,
) -> str | None:
    """Output, input and weight gradient against the reference on the operands each GEMM
    multiplies: ``forward`` (a, b), ``dgrad`` (grad, b), ``wgrad`` (a, grad)."""
    a, b = forward
    g, b_n = dgrad
    a_w, g_w = wgrad
    want = {
        "output": (ref.grouped_mm(a, b, offs), ref.grouped_mm(a.abs(), b.abs(), offs), K),
        "grad_a": (
            ref.grouped_mm_backward(a, b_n, offs, g)[0],
            ref.grouped_mm_backward(a.abs(), b_n.abs(), offs, g.abs())[0],
            N,
        ),
        "grad_b": (
            ref.grouped_mm_backward(a_w, b, offs, g_w)[1],
            ref.grouped_mm_backward(a_w.abs(), b.abs(), offs, g_w.abs())[1],
            GROUPS_MAX,
        ),
    }
    for name, (exact, mag, k) in want.items():
        excess = (got[name].detach().double().cpu() - exact).abs() - (2.0**-8 * exact.abs() + slack(mag, k))
        if bool((excess > 0).any()):
            return (
                f"{what} {name}: {int((excess > 0).sum())} of {excess.numel()} elements outside the bound, "
                f"max excess {excess.max().item():.3e}"
            )
    return None


def check_grouped_mm(device: str, groups: str, fn: Callable[..., torch.Tensor] = grouped.torch_grouped_mm) -> Checked:
    """torch's bfloat16 grouped GEMM (or ``fn``): the exact products of its bfloat16 operands."""
    a, b, offs, grad = problem(groups)
    got, refused = run(fn, a, b, offs, grad, device)
    if got is None:
        return Checked(refused, None)
    return Checked.compared(
        _compare(
            got,
            offs,
            (a, b),
            (grad, b),
            (a, grad),
            lambda m, k: gemm_accumulation(k, device) * m,
            f"_grouped_mm {groups}",
        )
    )


def check_mxfp8_grouped_mm(
    device: str,
    groups: str,
    pad: bool,
    emulated: bool = True,
    mode: str = "rceil",
    fn: Callable[..., torch.Tensor] | None = None,
) -> Checked:
    """torchao's MXFP8 grouped GEMM (or ``fn``): the exact products of fp8ref's MX operands, every
    block inside one expert (for the weight gradient, blocks of tokens restarting at each group)."""
    a, b, offs, grad = problem(groups, seed=1)

    def torchao(x: torch.Tensor, w: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        return grouped.torchao_mxfp8(x, w, o, mode=mode, pad=pad, emulated=emulated)

    got, refused = run(fn or torchao, a, b, offs, grad, device)
    if got is None:
        return Checked(refused, None)
    return Checked.compared(
        _compare(
            got,
            offs,
            (ref.mx_operand(a, mode), ref.mx_operand(b, mode, dim=1)),
            (ref.mx_operand(grad, mode), ref.mx_operand(b, mode, dim=2)),
            (ref.mx_tokens_operand(a, offs, mode), ref.mx_tokens_operand(grad, offs, mode)),
            lambda m, k: gemm_accumulation(k, device) * m,
            f"MXFP8 grouped {groups} pad={pad}",
        )
    )


def check_fp8_rowwise_grouped_mm(device: str, groups: str) -> Checked:
    """torchao's FP8 rowwise grouped GEMM (``_scaled_grouped_mm``; CUDA): within the E4M3 rounding
    of both operands of the exact bfloat16 products (module docstring)."""
    a, b, offs, grad = problem(groups, seed=2)
    got, refused = run(grouped.torchao_fp8_rowwise, a, b, offs, grad, device)
    if got is None:
        return Checked(refused, None)

    def slack(mag: torch.Tensor, k: int) -> torch.Tensor:
        return (2 * 2.0**-4 + 2.0**-8 + 2.0**-10 / 448 + gemm_accumulation(k, device)) * mag

    return Checked.compared(_compare(got, offs, (a, b), (grad, b), (a, grad), slack, f"FP8 rowwise grouped {groups}"))
