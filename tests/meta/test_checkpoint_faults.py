"""Checkpoints of FP8 state: a save that drops NVFP4's per-tensor scale, a loader that returns MX
scales in another layout, a checkpoint that rounds the master weights to bfloat16, one without the
optimizer state; each through the checks tests/cpu/install/test_checkpoints.py runs."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.state.keeping import check_kept, saved_and_loaded, subclass_examples
from fp8ref.harness.state.resume import check_resume, through_dcp

pytestmark = pytest.mark.needs("torchao")


def _drop_per_tensor_scale(t: torch.Tensor) -> torch.Tensor:
    names, ctx = t.__tensor_flatten__()  # type: ignore[attr-defined]
    inner = {n: getattr(t, n) for n in names if n != "per_tensor_scale"}
    return type(t).__tensor_unflatten__(inner, ctx, t.shape, t.stride())  # type: ignore[attr-defined]


def _scales_transposed(t: torch.Tensor) -> torch.Tensor:
    names, ctx = t.__tensor_flatten__()  # type: ignore[attr-defined]
    inner = {n: getattr(t, n) for n in names}
    inner["scale"] = inner["scale"].t().contiguous().t()  # the same values, column-major
    return type(t).__tensor_unflatten__(inner, ctx, t.shape, t.stride())  # type: ignore[attr-defined]


def _weights_in_bf16(ckpt: dict) -> dict:
    ckpt = saved_and_loaded(ckpt)
    ckpt["model"] = {k: v.to(torch.bfloat16).to(v.dtype) for k, v in ckpt["model"].items()}
    return ckpt


def _no_optimizer_state(ckpt: dict) -> dict:
    ckpt = saved_and_loaded(ckpt)
    ckpt["optim"] = {"state": {}, "param_groups": ckpt["optim"]["param_groups"]}
    return ckpt


def _dcp_loads_the_second_moment_as_the_first(ckpt: dict) -> dict:
    """A distributed checkpoint whose loader fills AdamW's exp_avg_sq from the exp_avg entry (a
    mix-up of keys in a planner): the moments come back, but not their own."""
    ckpt = through_dcp(ckpt)
    for state in ckpt["optim"]["state"].values():
        state["exp_avg_sq"] = state["exp_avg"].clone()
    return ckpt


KEEP_FAULTS = {
    "NVFP4's per-tensor scale dropped": ("nvfp4_two_level", _drop_per_tensor_scale),
    "MX scales loaded column-major": ("mx_e4m3", _scales_transposed),
}
RESUME_FAULTS = {
    "master weights kept in bfloat16": _weights_in_bf16,
    "optimizer state not kept": _no_optimizer_state,
    "DCP loads exp_avg_sq from exp_avg": _dcp_loads_the_second_moment_as_the_first,
}
FAULTS = [*KEEP_FAULTS, *RESUME_FAULTS]


def checkpoint_fault_caught(fault: str) -> bool:
    if fault in KEEP_FAULTS:
        kind, broken = KEEP_FAULTS[fault]
        t = subclass_examples()[kind]()
        return bool(check_kept(t, {"broken save": lambda t: broken(saved_and_loaded(t))}).problems)
    return check_resume("tensorwise", save=RESUME_FAULTS[fault]) is not None


def test_the_checks_pass_a_faithful_checkpoint():
    t = subclass_examples()["nvfp4_two_level"]()
    assert not check_kept(t, {"save": saved_and_loaded}).problems
    assert check_resume("tensorwise") is None


@pytest.mark.parametrize("fault", FAULTS)
def test_checkpoint_fault_is_caught(fault):
    assert checkpoint_fault_caught(fault), f"the checkpoint checks did not notice: {fault}"
