"""The GEMM family's profile keys: which ``torch._scaled_mm`` configurations and FP4
``F.scaled_mm`` GEMMs the device accepts and, where tensorwise runs, its accumulator, kernels,
scale forms and ``scale_result`` (``scaled_mm.*``, ``f_scaled_mm.*``); which mixture-of-experts
grouped GEMMs run (``grouped.*``); and the emulated MLP's losses (``emulated_mlp.*``).
What each key means: ``meanings.py``."""

from __future__ import annotations

import torch

from ..stack import install, probes
from ..stack.probing import Where, keys_or_refusal

__all__ = ["collect", "scaled_mm_keys", "grouped_keys", "emulated_mlp_keys"]


def collect(where: Where) -> dict:
    return scaled_mm_keys(where.device) | grouped_keys(where.device, where.torchao) | emulated_mlp_keys()


def scaled_mm_keys(device: str) -> dict:
    """Which _scaled_mm configurations (and FP4 GEMMs through F.scaled_mm) this device accepts
    (``ok`` or the install's refusal);
    where tensorwise runs, the accumulator's mantissa bits within one K block and across blocks,
    with fast accumulation off and on, and what ``scale_result`` does to an FP8 output
    (``fp8ref.harness.gemm.gemm_probes``)."""
    from . import gemm_probes

    out = {
        f"scaled_mm.{scaling}.{tag}": probes.scaled_mm_refusal(scaling, dtype, device) or "ok"
        for scaling in probes.SCALED_MM_SCALINGS
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32"))
    }
    # FP4 through torch.nn.functional.scaled_mm, the API torch runs MXFP4 through on CUDA
    out |= {
        f"f_scaled_mm.{kind}.{tag}": probes.fp4_scaled_mm_refusal(kind, "F.scaled_mm", dtype, device) or "ok"
        for kind in ("mxfp4", "nvfp4")
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32"))
    }
    if out["scaled_mm.tensorwise.f32"] == "ok":
        for span in gemm_probes.SPANS:
            for tag, fast in (("exact", False), ("fast", True)):
                key = f"scaled_mm.accum_bits.{span}.{tag}"
                out.update(
                    keys_or_refusal(
                        [key],
                        lambda key=key, fast=fast, span=span: {key: gemm_probes.accumulator_bits(device, fast, span)},
                        device=device,
                    )
                )
        for scaling in ("tensorwise", "rowwise"):  # which backend ran: one line of a diff when it changes
            key = f"scaled_mm.kernels.{scaling}"
            if out.get(f"scaled_mm.{scaling}.bf16") == "ok":
                out.update(
                    keys_or_refusal(
                        [key], lambda key=key, s=scaling: {key: gemm_probes.scaled_mm_kernels(s, device)}, device=device
                    )
                )
        for tag, fast in (("exact", False), ("fast", True)):
            key = f"scaled_mm.promotion_interval.{tag}"
            out.update(
                keys_or_refusal(
                    [key], lambda key=key, fast=fast: {key: gemm_probes.promotion_interval(device, fast)}, device=device
                )
            )
        forms = [f"scaled_mm.form.{k}" for k in ("tensorwise.0d", "rowwise.Mx1_1xN", "shape.M")]
        out.update(
            keys_or_refusal(
                forms,
                lambda: {f"scaled_mm.form.{k}": v for k, v in gemm_probes.scale_forms_and_shapes(device).items()},
                device=device,
            )
        )
        for fmt in ("e4m3fn", "e5m2"):
            key = f"scaled_mm.scale_result.{fmt}_out"
            out.update(
                keys_or_refusal(
                    [key],
                    lambda key=key, fmt=fmt: {
                        key: gemm_probes.scale_result_rule(device, getattr(torch, f"float8_{fmt}"))
                    },
                    device=device,
                )
            )
    return out


def grouped_keys(device: str, torchao: bool) -> dict:
    """Which mixture-of-experts grouped GEMMs run here, forward and backward (``gemm.grouped``)."""
    from . import grouped

    return grouped.outcomes(device, torchao=torchao and probes.torchao_float8_refusal() is None)


def emulated_mlp_keys() -> dict:
    """The MLP of ``fp8ref.harness.gemm.mlp_problem`` trained with fp8ref's emulated FP8 (tensorwise):
    the loss at a few steps, rounded; what moves it is torch's matmul and optimizer, not torch's FP8 casts (compared
    within ``TOLERANCES``)."""
    from .mlp_problem import train_mlp

    steps = (0, 50, 100, 200, 299)
    keys = [f"emulated_mlp.loss.step{s:03d}" for s in steps]

    def probe():
        with install.one_thread():
            losses = train_mlp(True, steps=300)
        return {k: round(losses[s], 4) for k, s in zip(keys, steps)}

    return keys_or_refusal(keys, probe)
