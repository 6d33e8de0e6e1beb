"""What the GPU suite's own guards must catch, shown on the CPU: an op that runs on float8 only on
the device and has no kind or reason (tests/gpu/test_native_ops.py), a runner whose transformers
lacks its fine-grained FP8 module under ``--fp8-require=transformers`` (tests/plugins/fixtures.py),
and a timed "FP8" layer that runs no FP8 GEMM (tests/gpu/test_throughput.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fp8ref.harness.native import device_only_ops as dno
from fp8ref.harness.speed.fp8_path import scaled_mm_calls

CPU = {"cat": {"e4m3fn": "runs"}, "mm": {"e4m3fn": "refused"}, "frobnicate": {"e4m3fn": "refused"}}
# the device runs mm (a reason: checked elsewhere), cat (a kind) and frobnicate (neither) on float8
DEVICE = {"cat": {"e4m3fn": "runs"}, "mm": {"e4m3fn": "runs"}, "frobnicate": {"e4m3fn": "partial"}}


def test_an_op_only_the_device_runs_without_a_kind_fails_naming_it():
    assert dno.device_only(DEVICE, CPU) == ["frobnicate", "mm"]
    lines = dno.unaccounted(DEVICE, CPU, "cuda", "torch X")
    assert len(lines) == 1 and lines[0].startswith("unchecked on cuda: torch X runs ['frobnicate']"), lines
    # the same op run on the CPU too is the CPU suite's failure as well, and says so
    both = dno.unaccounted(DEVICE, {**CPU, "frobnicate": {"e4m3fn": "runs"}}, "cuda", "torch X")
    assert both == ["torch X runs ['frobnicate'] on float8 on cuda and on the CPU, which no check covers"]
    assert dno.unaccounted({"cat": DEVICE["cat"], "mm": DEVICE["mm"]}, CPU, "cuda", "torch X") == []


@pytest.mark.needs("expecttest")
def test_an_op_only_the_device_runs_with_a_kind_is_checked_there(skip_if_refused):
    """``cat`` (movement) stands for an op the CPU does not run: its check runs on the device given."""
    from fp8ref.harness.native import native_ops

    skip_if_refused(native_ops.catalogue_refusal(), "torch's op catalogue (OpInfo)")
    checks = dno.device_only_checks(DEVICE, {"mm": {"e4m3fn": "refused"}}, "cpu")
    assert [(c.op, c.fmt) for c in checks] == [("cat", "e4m3fn")] and checks[0].samples > 0


def test_a_runner_requiring_transformers_fails_without_its_fine_grained_fp8(monkeypatch):
    from fp8ref.harness.hf import transformers_fp8
    from tests.plugins.fixtures import missing_required

    refused = "refused: ImportError: cannot import name 'finegrained_fp8' from 'transformers.integrations'"
    monkeypatch.setattr(transformers_fp8, "finegrained_refusal", lambda: refused)
    assert missing_required(["torch,transformers"]) == [f"transformers: {refused}"]
    monkeypatch.setattr(transformers_fp8, "finegrained_refusal", lambda: "missing: transformers is not installed")
    assert missing_required(["transformers"]) == ["transformers: missing: transformers is not installed"]


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("emulate", [False, True], ids=["scaled-mm", "emulated"])
def test_a_timed_fp8_layer_that_runs_no_fp8_gemm_is_seen(emulate):
    """torchao's emulate=True multiplies dequantized float32 operands: a throughput test timing it
    as FP8 would report a ratio of nothing; its scaled GEMM count is 0, not the recipe's 3."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name("tensorwise"), emulate=emulate)
    m = convert_to_float8_training(torch.nn.Sequential(torch.nn.Linear(64, 32, bias=False)).bfloat16(), config=cfg)
    x = torch.randn(16, 64).bfloat16().requires_grad_()
    g = torch.randn(16, 32).bfloat16()
    assert scaled_mm_calls(lambda: m(x).backward(g)) == (0 if emulate else 3)
