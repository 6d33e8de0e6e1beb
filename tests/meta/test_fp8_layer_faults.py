"""transformers' FP8Linear and FP8Experts (GPU kernels): the CUDA checks of
tests/gpu/test_transformers_fp8.py run here on emulations, a faithful one (the block reference's
weights, the input quantized in 1 x 128 tiles by fp8ref's codec, bfloat16 outputs) that must pass
and broken ones (a block's scale left out, the second routing weight ignored) that must be
caught, so the bounds and the reference code of those checks run on every CI."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from fp8ref.harness.hf.fp8_layer_forward import check_fp8experts_forward, check_fp8linear_forward, tiles
from fp8ref.reference.block_fp8 import BLOCK, expand
from fp8ref.reference.codec import decode
from fp8ref.reference.formats import E4M3FN


def _weight(codes: torch.Tensor, scale_inv: torch.Tensor, drop_first_scale: bool = False) -> torch.Tensor:
    s = scale_inv.clone()
    if drop_first_scale:
        s[0, 0] = 1.0
    return decode(codes, E4M3FN) * expand(s, codes.shape, BLOCK)


def _linear(drop: bool) -> Callable[..., torch.Tensor]:
    return lambda x, codes, s: (tiles(x) @ _weight(codes, s, drop).t()).to(torch.bfloat16)


def _experts(second_weight: bool) -> Callable[..., torch.Tensor]:
    def forward(x, index, weights, gate_up, down):
        out = torch.zeros(x.shape, dtype=torch.float32)
        for t in range(x.shape[0]):
            for k in range(2 if second_weight else 1):
                e = int(index[t, k])
                gu = (tiles(x[t : t + 1]) @ _weight(gate_up[e].codes, gate_up[e].scale_inv).t()).to(torch.bfloat16)
                g, u = gu.float().chunk(2, -1)
                h = (F.silu(g) * u).to(torch.bfloat16)
                y = (tiles(h) @ _weight(down[e].codes, down[e].scale_inv).t()).to(torch.bfloat16)
                out[t] += float(weights[t, k]) * y[0].float()
        return out.to(torch.bfloat16)

    return forward


def test_the_fp8linear_check_passes_a_faithful_emulation_and_catches_a_dropped_scale():
    assert check_fp8linear_forward("cpu", forward_fn=_linear(False)) == (None, None)
    refused, problem = check_fp8linear_forward("cpu", forward_fn=_linear(True))
    assert refused is None and problem is not None


def test_the_fp8experts_check_passes_a_faithful_emulation_and_catches_a_lost_routing_weight():
    assert check_fp8experts_forward("cpu", forward_fn=_experts(True)) == (None, None)
    refused, problem = check_fp8experts_forward("cpu", forward_fn=_experts(False))
    assert refused is None and problem is not None


FAULTS = {
    "FP8Linear: a block's scale left out": lambda: check_fp8linear_forward("cpu", forward_fn=_linear(True)),
    "FP8Experts: the second routing weight ignored": lambda: check_fp8experts_forward(
        "cpu", forward_fn=_experts(False)
    ),
}


def layer_fault_caught(fault: str) -> bool:
    refused, problem = FAULTS[fault]()
    return refused is None and problem is not None
