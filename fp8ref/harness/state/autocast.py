"""Float8 training under ``torch.autocast``: which dtype an FP8 linear layer quantizes its input
from, and which dtype it returns, held against the reference layer fed each candidate dtype.

Autocast rewrites the dtype of the ops it knows; an FP8 layer is a custom autograd function it
does not know, so each implementation decides itself (torchao's Float8Linear asks
``torch.is_autocast_enabled()`` and the GPU autocast dtype). Both answers are implementation-
defined and pinned (``torchao.autocast.<device>.<dtype>.<recipe>``); what is not is that the
output is the reference's for one of them: the input quantized from float32 or from the autocast
dtype, the output rounded once to the dtype returned.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from ...reference.emulate import Fp8Linear, install_float32_order

__all__ = ["autocast_answer", "autocast_inputs"]


def autocast_inputs(device: str = "cpu") -> tuple[torch.nn.Linear, torch.Tensor]:
    """A float32 Linear(128, 64) without bias and a float32 input (4, 16, 128)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(128, 64, bias=False).to(device)
    x = torch.randn(4, 16, 128, generator=torch.Generator().manual_seed(1)).to(device)
    return lin, x


def autocast_answer(
    make: Callable[[torch.nn.Linear], torch.nn.Module], recipe: str, dtype: torch.dtype, device: str = "cpu"
) -> str:
    """``input from <dtype>, output <dtype>`` when the layer built by ``make`` under
    ``torch.autocast(device, dtype)`` equals the reference fed the input in that dtype (output
    rounded to the returned dtype), else ``other: ...``. The reference is fp8ref's Fp8Linear, its
    GEMM in the install's float32 order on the device with TF32 off for both sides
    (``emulate.install_float32_order``): the question is which dtypes the layer uses, and the
    layers ``make`` builds emulate FP8 by that same float32 matmul (torchao's ``emulate=True``)."""
    lin, x = autocast_inputs(device)
    module = make(lin)
    with install_float32_order():
        with torch.autocast(torch.device(device).type, dtype=dtype):
            y = module(x)
        for source in (torch.float32, dtype):
            ours = Fp8Linear.from_linear(copy.deepcopy(lin), recipe)(x.to(source)).detach()
            if torch.equal(y.detach(), ours.to(y.dtype)):
                return f"input from {_name(source)}, output {_name(y.dtype)}"
    return f"other: output {_name(y.dtype)} matches the reference fed neither float32 nor {_name(dtype)}"


def _name(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")
