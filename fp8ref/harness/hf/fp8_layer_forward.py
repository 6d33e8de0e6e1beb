"""transformers' FP8Linear forward (Triton or DeepGEMM: a GPU path) against fp8ref's block
reference, shared by tests/gpu/test_transformers_fp8.py and its CPU dry run (where transformers'
kernels refuse it, and the test skips naming that). The CPU checks of the quantizer, the loader and
the backward are fp8ref/harness/hf/block_checks.py."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...reference.block_fp8 import BLOCK, quantize_blocks
from ...reference.formats import E4M3FN
from ...reference.metrics import calc_diff
from ...reference.quantize import quantize
from ...reference.scaling import tile
from ..gemm.documented_accumulator import gemm_accumulation
from ..stack.checked import Checked


def check_fp8linear_forward(
    device: str, scale_fmt: str = "float", forward_fn: Callable[..., torch.Tensor] | None = None
) -> Checked:
    """``FP8Linear`` (128 x 128 weight blocks from the reference, activations quantized by
    transformers in 1 x 128 tiles) against the exact product of the bfloat16 input and the
    reference's dequantized weight, within what quantizing the input to E4M3 may change (per
    element: 2^-4 relative, round to nearest, plus half E4M3's smallest subnormal times its
    tile's inverse scale amax / 448, x 1.01 for that scale's own rounding), the device's
    accumulation bound b over m = sum |x||w|, and one bfloat16 rounding of the output:
    |got - ref| <= sum_k |w_k| (2^-4 |x_k| + 2^-10 amax_k / 448) 1.01 + b m + 2^-8 |ref|.
    ``forward_fn(x, codes, scale_inv)``: a stand-in for the layer (tests/meta). Returns (refusal,
    problem): the refusal is ``fp8_layer_refusal``'s, asked before the layer runs unguarded."""
    from .transformers_fp8 import fp8_layer_refusal, require_transformers

    if forward_fn is None and (refused := fp8_layer_refusal("linear", device)) is not None:
        return Checked.refused(refused)
    fp8 = require_transformers("transformers' FP8Linear") if forward_fn is None else None
    gen = torch.Generator().manual_seed(30)
    w = (torch.randn(256, 384, generator=gen) * 0.02).to(torch.bfloat16)
    x = torch.randn(32, 384, generator=gen).to(torch.bfloat16)
    q = quantize_blocks(w, BLOCK, scale_fmt)

    def forward() -> torch.Tensor:
        if forward_fn is not None:
            return forward_fn(x, q.codes, q.scale_inv)
        assert fp8 is not None  # (required above when there is no stand-in)
        layer = fp8.FP8Linear(384, 256, block_size=BLOCK, scale_fmt=scale_fmt)
        with torch.no_grad():
            layer.weight.copy_(q.codes.view(torch.float8_e4m3fn))
            layer.weight_scale_inv.copy_(q.scale_inv.to(layer.weight_scale_inv.dtype))
        return layer.to(device)(x.to(device))

    got = forward()
    x64, w64 = x.double(), q.dequantize(torch.float32).double()
    ref = x64 @ w64.t()
    tile_amax = x64.abs().reshape(32, 3, 128).amax(-1).repeat_interleave(128, -1)
    quant = (2.0**-4 * x64.abs() + 2.0**-10 * tile_amax / 448) * 1.01
    mag = x64.abs() @ w64.abs().t()
    acc = gemm_accumulation(384, device)
    bound = quant @ w64.abs().t() + acc * mag + 2.0**-8 * ref.abs()
    excess = (got.double().cpu() - ref).abs() - bound
    if bool((excess > 0).any()):
        return Checked.compared(
            f"FP8Linear on {device} ({scale_fmt}): {int((excess > 0).sum())} outputs outside the bound"
        )
    return Checked.compared(None)


def tiles(x: torch.Tensor) -> torch.Tensor:
    """``x`` (rows, cols) as an FP8 GEMM's input in DeepSeek-V3's recipe: E4M3 in 1 x 128 tiles along
    the last dim (scale 448 / amax, the last tile padded with zeros), dequantized to float32."""
    cols = x.shape[-1]
    padded = torch.nn.functional.pad(x.float(), (0, -cols % 128))
    return quantize(padded, E4M3FN, tile(128)).dequantize(torch.float32)[..., :cols]


def check_fp8experts_forward(device: str, forward_fn: Callable[..., torch.Tensor] | None = None) -> Checked:
    """``FP8Experts`` (a mixture-of-experts layer: each token routed to two of four experts, each a
    gated SiLU MLP of two FP8 GEMMs in 128 x 128 weight blocks from the reference) against the
    layer as the recipe defines it (DeepSeek-V3: each GEMM's input quantized to E4M3 in 1 x 128
    tiles, ``tiles``; the reference's weights; float64 between), judged as DeepGEMM judges its FP8
    GEMMs: calc_diff(got, reference) < 1e-3 (fp8ref.reference.metrics.calc_diff). A kernel that
    follows the recipe differs from it by accumulation order and bfloat16 roundings (an emulation
    that rounds where the kernels do: 1.0e-4); a lost routing weight gives 0.40. (A worst-case
    bound carried through two quantized GEMMs and the SiLU is some 40 times the output here, too
    loose to tell a lost expert.) ``forward_fn(x, index, weights, gate_up, down)``: a stand-in for
    the layer (tests/meta). Returns (refusal, problem): the refusal is ``fp8_layer_refusal``'s, asked
    before the layer runs unguarded."""
    import types

    from .transformers_fp8 import fp8_layer_refusal, require_transformers

    if forward_fn is None and (refused := fp8_layer_refusal("experts", device)) is not None:
        return Checked.refused(refused)
    fp8 = require_transformers("transformers' FP8Experts") if forward_fn is None else None
    hidden, inter, experts, tokens = 256, 128, 4, 24
    config = types.SimpleNamespace(
        hidden_size=hidden, moe_intermediate_size=inter, num_experts=experts, hidden_act="silu"
    )
    gen = torch.Generator().manual_seed(31)
    gate_up = [
        quantize_blocks((torch.randn(2 * inter, hidden, generator=gen) * 0.05).to(torch.bfloat16))
        for _ in range(experts)
    ]
    down = [
        quantize_blocks((torch.randn(hidden, inter, generator=gen) * 0.05).to(torch.bfloat16)) for _ in range(experts)
    ]
    x = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16)
    index = torch.stack([torch.randperm(experts, generator=gen)[:2] for _ in range(tokens)])
    weights = torch.softmax(torch.randn(tokens, 2, generator=gen), -1).to(torch.bfloat16)

    def forward() -> torch.Tensor:
        if forward_fn is not None:
            return forward_fn(x, index, weights, gate_up, down)
        assert fp8 is not None  # (required above when there is no stand-in)
        layer = fp8.FP8Experts(config, block_size=BLOCK)
        with torch.no_grad():
            layer.gate_up_proj.copy_(torch.stack([q.codes for q in gate_up]).view(torch.float8_e4m3fn))
            layer.gate_up_proj_scale_inv.copy_(torch.stack([q.scale_inv for q in gate_up]))
            layer.down_proj.copy_(torch.stack([q.codes for q in down]).view(torch.float8_e4m3fn))
            layer.down_proj_scale_inv.copy_(torch.stack([q.scale_inv for q in down]))
        return layer.to(device)(x.to(device), index.to(device), weights.to(device))

    got = forward()
    want = torch.zeros(tokens, hidden, dtype=torch.float64)
    x64 = x.double()
    for tok in range(tokens):
        for k in range(2):
            e = int(index[tok, k])
            gu = tiles(x64[tok : tok + 1]).double() @ gate_up[e].dequantize(torch.float32).double().t()
            g, u = gu.chunk(2, -1)
            h = torch.nn.functional.silu(g) * u
            want[tok] += (
                float(weights[tok, k]) * (tiles(h).double() @ down[e].dequantize(torch.float32).double().t())[0]
            )
    diff = calc_diff(got.double().cpu(), want)
    if not diff < 1e-3:
        return Checked.compared(
            f"FP8Experts on {device}: calc_diff {diff:.2e} against the recipe's layer (DeepGEMM's bound 1e-3)"
        )
    return Checked.compared(None)
