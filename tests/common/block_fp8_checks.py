"""transformers' FP8Linear forward (Triton or DeepGEMM: a GPU path) against fp8ref's block
reference, shared by tests/gpu/test_transformers_fp8.py and its CPU dry run (where transformers'
kernels refuse it, and the test skips naming that). The CPU checks of the quantizer, the loader and
the backward are fp8ref/harness/hf/block_checks.py."""

from __future__ import annotations

import torch

from fp8ref.harness.stack.refusals import attempt
from fp8ref.reference.block_fp8 import BLOCK, quantize_blocks
from tests.common.float8linear_checks import device_accumulator


def check_fp8linear_forward(device: str, scale_fmt: str = "float") -> tuple[str | None, str | None]:
    """``FP8Linear`` (128 x 128 weight blocks from the reference, activations quantized by
    transformers in 1 x 128 tiles) against the exact product of the bfloat16 input and the
    reference's dequantized weight, within what quantizing the input to E4M3 may change (per
    element: 2^-4 relative, round to nearest, plus half E4M3's smallest subnormal times its
    tile's inverse scale amax / 448, x 1.01 for that scale's own rounding), the device's
    accumulation bound b over m = sum |x||w|, and one bfloat16 rounding of the output:
    |got - ref| <= sum_k |w_k| (2^-4 |x_k| + 2^-10 amax_k / 448) 1.01 + b m + 2^-8 |ref|.
    Returns (refusal, problem)."""
    from fp8ref.harness.gemm.gemm_probes import accumulation_bound
    from fp8ref.harness.hf.transformers_fp8 import require_transformers

    fp8 = require_transformers("transformers' FP8Linear")
    gen = torch.Generator().manual_seed(30)
    w = (torch.randn(256, 384, generator=gen) * 0.02).to(torch.bfloat16)
    x = torch.randn(32, 384, generator=gen).to(torch.bfloat16)
    q = quantize_blocks(w, BLOCK, scale_fmt)

    def forward() -> torch.Tensor:
        layer = fp8.FP8Linear(384, 256, block_size=BLOCK, scale_fmt=scale_fmt)
        with torch.no_grad():
            layer.weight.copy_(q.codes.view(torch.float8_e4m3fn))
            layer.weight_scale_inv.copy_(q.scale_inv.to(layer.weight_scale_inv.dtype))
        return layer.to(device)(x.to(device))

    ok, got = attempt(forward, device)
    if not ok:
        return str(got), None
    assert isinstance(got, torch.Tensor)
    x64, w64 = x.double(), q.dequantize(torch.float32).double()
    ref = x64 @ w64.t()
    tile_amax = x64.abs().reshape(32, 3, 128).amax(-1).repeat_interleave(128, -1)
    quant = (2.0**-4 * x64.abs() + 2.0**-10 * tile_amax / 448) * 1.01
    mag = x64.abs() @ w64.abs().t()
    acc = max((384 + 1) * 2.0**-24, accumulation_bound(384, *device_accumulator(device)))
    bound = quant @ w64.abs().t() + acc * mag + 2.0**-8 * ref.abs()
    excess = (got.double().cpu() - ref).abs() - bound
    if bool((excess > 0).any()):
        return None, f"FP8Linear on {device} ({scale_fmt}): {int((excess > 0).sum())} outputs outside the bound"
    return None, None
