"""torchao's float8 inference: ``torchao.quantization.quantize_`` of a tiny MLP with
``Float8WeightOnlyConfig`` (weights stored in E4M3, dequantized for the matmul) or
``Float8DynamicActivationFloat8WeightConfig`` (activations cast at run time too), then a
forward. torchao builds the second only on GPUs with FP8 tensor cores: on the CPU its refusal is
recorded."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..stack.probes import torchao_float8_refusal
from ..stack.refusals import attempt
from . import tiny
from .base import Workload

__all__ = ["WORKLOADS", "run", "CONFIGS"]

CONFIGS = ("Float8WeightOnlyConfig", "Float8DynamicActivationFloat8WeightConfig")


def _config(name: str) -> Any:
    from torchao import quantization

    return getattr(quantization, name)()


def run(config: str) -> torch.Tensor:
    """``quantize_`` of the MLP with ``config``, then a forward of one batch; the output."""
    from torchao.quantization import quantize_

    model = tiny.mlp()
    quantize_(model, _config(config))
    x, _ = tiny.batch(0)
    with torch.no_grad():
        return model(x)


@functools.cache
def refusal(config: str, device: str = "cpu") -> str | None:
    """The install's words when torchao does not quantize and run one bfloat16 Linear(32, 16)
    with ``config`` on ``device``."""
    missing = torchao_float8_refusal()
    if missing is not None:
        return missing

    def smallest() -> torch.Tensor:
        from torchao.quantization import quantize_

        lin = torch.nn.Sequential(torch.nn.Linear(32, 16, bias=False, dtype=torch.bfloat16, device=device))
        quantize_(lin, _config(config))
        return lin(torch.ones(16, 32, dtype=torch.bfloat16, device=device))

    ok, result = attempt(smallest, device)
    return None if ok else str(result)


# the weights' casts into float8 and, weight-only, their decodes for the matmul and the two
# layers' GEMMs of the dequantized weights
_EXPECTS = {
    "Float8WeightOnlyConfig": {
        ("aten._to_copy.default", "cast"): 2,
        ("aten._to_copy.default", "values"): 2,
        ("aten.mm.default", "dequantized_gemm"): 2,
    },
    "Float8DynamicActivationFloat8WeightConfig": {("aten._to_copy.default", "cast"): 4},
}

WORKLOADS = {
    f"float8_inference.{config}": Workload(
        name=f"float8_inference.{config}",
        what=f"torchao quantize_ with {config} on a 2-layer MLP, then a forward",
        module=__name__,
        run=functools.partial(run, config),
        refusal=functools.partial(refusal, config),
        expects=_EXPECTS[config],
    )
    for config in CONFIGS
}
