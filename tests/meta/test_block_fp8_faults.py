"""FP8 block checkpoints: stand-ins for transformers' quantizer, loader and backward with a fault
in the scales, the block layout or the rounding of the scale, and a loaded model missing what a
checkpoint keeps; each through the checks tests/cpu/install/test_transformers_fp8.py runs
(fp8ref/harness/hf/block_checks.py, block_checkpoint.py), which must report it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fp8ref.harness.hf import block_checkpoint, block_checks
from fp8ref.reference.block_fp8 import BLOCK, ScaleFormat, block_amax, block_scales, expand, quantize_blocks
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.formats import E4M3FN


def _quantized_with(inv_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[..., Any]:
    """A quantizer whose stored inverse scale is ``inv_of(amax, the reference's inverse)``, its codes
    quantized under the forward scale that inverse implies."""

    def quantize(w: torch.Tensor, block: tuple[int, int], scale_fmt: str) -> Any:
        amax = block_amax(w, BLOCK)
        inv = inv_of(amax, block_scales(amax, scale_fmt)[1])
        y = (w.float() * expand((1.0 / inv.double()).float(), w.shape, BLOCK)).clamp(-448, 448)
        return encode(y, E4M3FN, saturate=True), inv, block_checks.stored_dtype(scale_fmt)

    return quantize


def _ue8m0_rounded_down(amax: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    float_inv = block_scales(amax, ScaleFormat.FLOAT)[1]
    return torch.exp2(torch.floor(torch.log2(float_inv.double()))).float()


def _scale_in_bfloat16(amax: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    return inv.to(torch.bfloat16).float()


def _blocks_of_64(w: torch.Tensor, block: tuple[int, int], scale_fmt: str) -> Any:
    q = quantize_blocks(w, (64, 64), scale_fmt)
    return q.codes, q.scale_inv, block_checks.stored_dtype(scale_fmt)


QUANTIZE_FAULTS = {
    "UE8M0 inverse rounded down": ("ue8m0", _quantized_with(_ue8m0_rounded_down)),
    "scale rounded to bfloat16": ("float", _quantized_with(_scale_in_bfloat16)),
    "64 x 64 blocks": ("float", _blocks_of_64),
}


def _grid_read_transposed(codes, inv, dtype, scale_dtype):
    gm, gn = inv.shape[-2:]
    flipped = inv.transpose(-1, -2).reshape(inv.shape)  # (the grid's values read column by column)
    return (
        (decode(codes, E4M3FN) * expand(flipped, codes.shape, BLOCK)).to(dtype) if gm != gn else codes.float().to(dtype)
    )


def _scale_dropped(codes, inv, dtype, scale_dtype):
    return decode(codes, E4M3FN).to(dtype)


def _backward_scales_shifted(codes, inv, dtype, scale_dtype):
    return (decode(codes, E4M3FN) * expand(inv.roll(1, dims=-1), codes.shape, BLOCK)).to(dtype)


LOADER_FAULTS = {
    "loader reads the scale grid transposed": _grid_read_transposed,
    "loader drops the scale": _scale_dropped,
}


def quantize_fault_caught(fault: str) -> bool:
    scale_fmt, quantize = QUANTIZE_FAULTS[fault]
    return bool(block_checks.check_quantize(scale_fmt, quantize=quantize).problems)


def loader_fault_caught(fault: str) -> bool:
    return bool(block_checks.check_loader(torch.float32, "float", loader=LOADER_FAULTS[fault]).problems)


def backward_fault_caught() -> bool:
    return bool(block_checks.check_backward(torch.float32, "float", backward=_backward_scales_shifted).problems)


def checkpoint_fault_caught() -> bool:
    """A loaded model whose ragged MLP weight kept the codes of its last row of blocks unscaled."""
    w = torch.randn(448, 256, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16) * 0.02
    q = quantize_blocks(w)
    loaded = q.dequantize(torch.bfloat16).clone()
    loaded[384:] = decode(q.codes[384:], E4M3FN).to(torch.bfloat16)
    return bool(block_checkpoint.check_load({"mlp.up_proj.weight": loaded}, {"mlp.up_proj.weight": q}).problems)


FAULTS = [
    *QUANTIZE_FAULTS,
    *LOADER_FAULTS,
    "backward applies each scale one block column over",
    "a loaded ragged block left unscaled",
]


def block_fp8_fault_caught(fault: str) -> bool:
    if fault in QUANTIZE_FAULTS:
        return quantize_fault_caught(fault)
    if fault in LOADER_FAULTS:
        return loader_fault_caught(fault)
    return (
        backward_fault_caught()
        if fault == "backward applies each scale one block column over"
        else checkpoint_fault_caught()
    )


@pytest.mark.parametrize("fault", FAULTS)
def test_a_block_fp8_fault_is_caught(fault):
    assert block_fp8_fault_caught(fault), f"{fault}: not caught"


def test_the_checks_pass_the_reference_itself():
    """The stand-ins' correct twin: the reference's own quantizer, loader and backward."""

    def quantize(w, block, scale_fmt):
        q = quantize_blocks(w, block, scale_fmt)
        return q.codes, q.scale_inv, block_checks.stored_dtype(scale_fmt)

    def dequantize(codes, inv, dtype, scale_dtype):
        return (decode(codes, E4M3FN) * expand(inv, codes.shape, BLOCK)).to(dtype)

    for fmt in ("float", "ue8m0"):
        assert block_checks.check_quantize(fmt, quantize=quantize).problems == []
        assert block_checks.check_loader(torch.bfloat16, fmt, loader=dequantize).known_deviations == {}
        assert block_checks.check_backward(torch.bfloat16, fmt, backward=dequantize).known_deviations == {}
