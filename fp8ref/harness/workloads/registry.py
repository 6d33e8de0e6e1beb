"""``WORKLOADS``: every workload fp8ref ships, by name."""

from __future__ import annotations

from . import (
    accelerate_fp8,
    checkpointing,
    compiled,
    delayed_scaling,
    exported,
    float8_inference,
    float8_linear,
    grad_accumulation,
    moe_dispatch,
    mx_training,
    qat,
    static_custom_op,
)
from .base import Workload

__all__ = ["WORKLOADS"]

WORKLOADS: dict[str, Workload] = {
    **float8_linear.WORKLOADS,
    "grad_accumulation": grad_accumulation.WORKLOAD,
    "checkpointing": checkpointing.WORKLOAD,
    "static_custom_op": static_custom_op.WORKLOAD,
    "delayed_scaling": delayed_scaling.WORKLOAD,
    "moe_dispatch": moe_dispatch.WORKLOAD,
    **float8_inference.WORKLOADS,
    "mx_training": mx_training.WORKLOAD,
    "qat": qat.WORKLOAD,
    "accelerate_fp8": accelerate_fp8.WORKLOAD,
    "exported": exported.WORKLOAD,
    **compiled.WORKLOADS,
}
