"""The grouped GEMMs of mixture-of-experts training, as the install offers them, in fp8ref's terms:
torch's ``_grouped_mm`` (bfloat16; on the CPU too), ``_scaled_grouped_mm`` (FP8 rowwise, CUDA), and
torchao's ``prototype.moe_training`` (FP8 rowwise through ``_scaled_grouped_mm``; MXFP8, with an
emulated path built on ``to_mx`` that runs anywhere). Each takes tokens ``a`` (M, K) sorted by
expert, the experts' weights ``b`` (E, K, N) and the groups' end rows ``offs`` (int32), and returns
the output (M, N) in autograd, so a backward gives both gradients. Held to
``reference.grouped`` by fp8ref/harness/gemm/grouped_bounds.py; which ones run is pinned
(``grouped.*``). Written against torch 2.9-2.15 and torchao 0.17-0.18.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ..ao.torchao_compat import require_torchao

__all__ = ["torch_grouped_mm", "torchao_fp8_rowwise", "torchao_mxfp8", "column_major_experts", "refusal", "outcomes"]


def column_major_experts(b: torch.Tensor) -> torch.Tensor:
    """The experts' weights laid out as the grouped kernels take them: each (K, N) column-major."""
    return b.transpose(-2, -1).contiguous().transpose(-2, -1)


def torch_grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``torch._grouped_mm(a, b, offs=offs)``."""
    return torch._grouped_mm(a, b, offs=offs)


def torchao_fp8_rowwise(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """torchao's FP8 rowwise grouped GEMM (``_to_fp8_rowwise_then_scaled_grouped_mm``): E4M3,
    power-of-two scales per token and per expert column, through ``torch._scaled_grouped_mm``."""
    require_torchao("torchao's FP8 grouped GEMM")
    from torchao.prototype.moe_training import _to_fp8_rowwise_then_scaled_grouped_mm

    return _to_fp8_rowwise_then_scaled_grouped_mm(
        a, column_major_experts(b), offs, out_dtype=torch.bfloat16, pad_token_groups_for_grouped_mm=False
    )


def torchao_mxfp8(
    a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, mode: str = "rceil", pad: bool = False, emulated: bool = True
) -> torch.Tensor:
    """torchao's MXFP8 grouped GEMM (``_to_mxfp8_then_scaled_grouped_mm``): E4M3 in blocks of 32,
    ``emulated`` (``KernelPreference.EMULATED``: ``to_mx`` and a bfloat16 grouped GEMM) or its
    kernels (``AUTO``); ``pad``: ``pad_token_groups_for_grouped_mm`` (each group padded to a
    multiple of 32 tokens)."""
    require_torchao("torchao's MXFP8 grouped GEMM")
    from torchao.prototype.moe_training import _to_mxfp8_then_scaled_grouped_mm
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    return _to_mxfp8_then_scaled_grouped_mm(
        a,
        column_major_experts(b),
        offs,
        out_dtype=torch.bfloat16,
        kernel_preference=KernelPreference.EMULATED if emulated else KernelPreference.AUTO,
        scale_calculation_mode=ScaleCalculationMode(mode),
        pad_token_groups_for_grouped_mm=pad,
    )


def refusal(fn: Callable[..., torch.Tensor], sizes: tuple[int, ...], device: str, profile: bool = False) -> str | None:
    """None when ``fn`` goes forward and backward on groups of ``sizes`` tokens (the smallest call
    that asks: 64 features, 32 outputs), else the install's refusal (``refused: ...``). Any other
    error propagates (``fp8ref.harness.stack.refusals.attempt``); with ``profile``, an error of the
    install is recorded as ``fails: ...`` (``refusals.observe``)."""
    from ..stack.refusals import attempt, observe

    offs = torch.tensor(sizes).cumsum(0).to(torch.int32).to(device)
    a = torch.randn(int(offs[-1]), 64, device=device, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(len(sizes), 64, 32, device=device, dtype=torch.bfloat16, requires_grad=True)
    ok, answer = (observe if profile else attempt)(lambda: fn(a, b, offs).float().square().sum().backward(), device)
    return None if ok else str(answer)


def _runs(fn: Callable[..., torch.Tensor], sizes: tuple[int, ...], device: str) -> str:
    return refusal(fn, sizes, device, profile=True) or "runs"


def outcomes(device: str = "cpu", torchao: bool = True) -> dict[str, str]:
    """``grouped.<path>``: which grouped GEMMs run forward and backward here (the profile's keys;
    their numbers are held to the reference by fp8ref/harness/gemm/grouped_bounds.py): groups of 32, 0,
    64 tokens, and for torchao's MXFP8 also 16, 0, 24 (not a multiple of 32), padded or not."""
    aligned, ragged = (32, 0, 64), (16, 0, 24)
    out = {"grouped.torch._grouped_mm": _runs(torch_grouped_mm, ragged, device)}
    if not torchao:
        return out
    out["grouped.torchao.fp8_rowwise"] = _runs(torchao_fp8_rowwise, aligned, device)
    for name, sizes, pad in (
        ("aligned", aligned, False),
        ("ragged_unpadded", ragged, False),
        ("ragged_padded", ragged, True),
    ):
        fn = functools.partial(torchao_mxfp8, pad=pad)
        out[f"grouped.torchao.mxfp8.emulated.{name}"] = _runs(fn, sizes, device)
    return out
