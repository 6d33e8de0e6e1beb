"""The FP8 lifecycle as workloads (``fp8ref.harness.workloads``): each tiny training or inference
program fp8ref ships, traced on this install, must run clean: no violation, the FP8 calls it is
for (casts, scaled GEMMs, the in-place re-quantization of a cached float8 weight) seen and
checked, and every call site a line of the workload's own module (the tracer names a shipped
workload's lines as a user's, docs/trace.md). A workload the install refuses skips with its words.
Each trace is the one the behaviour profile pins (``workloads.traced``: once per session); the
golden test holds its digest, and the upgrade report names where it first diverges. Each also
runs as its CUDA twin (the ``cuda`` cases: ``pytest -m gpu``, on the CPU under --fp8-dry-run).
The fault only a workload reaches is tests/meta/test_workload_faults.py."""

from __future__ import annotations

import os

import pytest
import torch

from fp8ref.harness.trace import trace
from fp8ref.harness.workloads import WORKLOADS, check
from fp8ref.harness.workloads.base import source_file
from fp8ref.harness.workloads.traced import traced
from tests.common.params import on_devices

ON_DEVICES = on_devices(pytest.mark.sm(89, "FP8 tensor cores"))

CAST, SCALED_MM = ("aten._to_copy.default", "cast"), ("aten._scaled_mm.default", "scaled_mm")
DEQUANTIZED_MM = ("aten.mm.default", "dequantized_gemm")
# what each program must run, whatever its workload's own list says
MUST_RUN = {
    "float8_linear.": {CAST, SCALED_MM},
    "grad_accumulation": {CAST, SCALED_MM},
    "checkpointing": {CAST, SCALED_MM},
    "static_custom_op": {CAST, SCALED_MM, ("aten.copy_.default", "cast")},
    "delayed_scaling": {CAST, SCALED_MM},
    "moe_dispatch": {
        CAST,
        SCALED_MM,
        ("aten.index_select.default", "movement"),
        ("aten.where.self", "movement"),
        ("aten.split_with_sizes.default", "movement"),
        ("aten.split.Tensor", "movement"),
    },
    "float8_inference.Float8WeightOnlyConfig": {CAST, DEQUANTIZED_MM},
    "float8_inference.Float8DynamicActivationFloat8WeightConfig": {CAST},
    "mx_training": {CAST, ("aten.to.dtype", "values"), ("aten.exp2.default", "e8m0_scale"), DEQUANTIZED_MM},
    "exported": {CAST, SCALED_MM},
    "qat": {CAST, ("aten._to_copy.default", "values"), DEQUANTIZED_MM},
    "accelerate_fp8": {CAST, SCALED_MM, ("aten.pad.default", "written")},
    "compiled.": {CAST, SCALED_MM},
}


def _must_run(name: str) -> set[tuple[str, str]]:
    (kinds,) = [kinds for prefix, kinds in MUST_RUN.items() if name.startswith(prefix)]
    return kinds


@ON_DEVICES
@pytest.mark.parametrize("name", WORKLOADS)
def test_the_workload_traces_clean(name, device, skip_if_refused):
    """On the CPU, and as its CUDA twin on a GPU (the same seeded weights and batches moved there,
    ``tiny.on``): torch's CUDA kernels and torchao's GPU paths held to the definition op by op."""
    workload = WORKLOADS[name]
    skip_if_refused(workload.refusal(device), f"the {name} workload on {device} ({workload.what})")
    got = traced(name, device)  # (the trace the profile pins: one run of each workload per session)
    problem = check(workload, got)
    assert problem is None, f"on {device}: {problem}"
    seen = {(r.op, r.kind) for r in got.records if r.status != "unchecked"}
    missed = sorted(_must_run(name) - seen)
    assert not missed, f"{name} on {device}: never checked {missed}; checked {sorted(seen)}"
    own = source_file(workload)
    assert own.endswith(os.path.join("fp8ref", "harness", "workloads", f"{workload.module.rpartition('.')[2]}.py"))
    assert {os.path.realpath(r.site.rpartition(":")[0]) for r in got.records} == {own}, {r.site for r in got.records}


def test_every_workload_has_what_it_must_run():
    assert all(_must_run(name) for name in WORKLOADS)


def test_the_custom_op_is_seen_through_and_its_trace_repeats(skip_if_refused):
    """modded-nanogpt's custom op runs its casts and GEMMs inside one op: the tracer runs its body
    op by op and keeps the op itself among the calls seen through; a second run from the same
    seed computes the same float8 codes the same way (the digest)."""
    workload = WORKLOADS["static_custom_op"]
    skip_if_refused(workload.refusal("cpu"), "the static_custom_op workload")
    got = traced("static_custom_op")
    ops = {op for op, how, _ in got.through if how == "torch.library.custom_op"}
    assert ops == {"fp8ref_workloads.static_fp8_mm.default", "fp8ref_workloads.static_fp8_mm_backward.default"}, ops
    assert not any(r.op.startswith("fp8ref_workloads.") for r in got.records)
    again = trace(workload.run)
    assert again.digest() == got.digest() and again.pinned() == got.pinned()


def test_the_moe_workload_runs_the_op_mix_of_fp8_moe_code(skip_if_refused):
    """What FP8 MoE code runs on float8 tensors and the other workloads do not: a dispatch that
    repeats rows (each token to two experts), a mask that changes codes (slots no token filled),
    and float8 -> float8 casts (E4M3 gradient codes to E5M2), each checked."""
    from fp8ref.harness.workloads import moe_dispatch

    workload = WORKLOADS["moe_dispatch"]
    skip_if_refused(workload.refusal("cpu"), f"the moe_dispatch workload ({workload.what})")
    got = traced("moe_dispatch")
    checked = [r for r in got.records if r.status == "ok"]
    f8_to_f8 = [
        r
        for r in checked
        if r.op == "aten._to_copy.default"
        and [t.dtype for t in r.inputs + r.outputs] == ["float8_e4m3fn", "float8_e5m2"]
    ]
    assert len(f8_to_f8) == moe_dispatch.EXPERTS * moe_dispatch.STEPS, [r.line() for r in f8_to_f8]
    dispatched = [r for r in checked if r.op == "aten.index_select.default"]
    assert dispatched and all(r.outputs[0].shape[0] > r.inputs[0].shape[0] for r in dispatched)  # (rows repeat)
    masked = [r for r in checked if r.op == "aten.where.self"]
    assert masked and all(r.outputs[0].sha256 != r.inputs[1].sha256 for r in masked), [r.line() for r in masked]


def test_the_moe_routing_keeps_each_experts_capacity_and_drops_the_rest():
    """``route``: slots expert by expert, each expert's tokens in token order up to its capacity."""
    from fp8ref.harness.workloads import moe_dispatch as moe

    cap = moe.CAPACITY
    # tokens 0..cap: every one to experts 0 and 2; so expert 0 and 2 overflow by one, 1 and 3 stay empty
    top = torch.tensor([[0, 2]] * (cap + 1))
    token, pick, filled = moe.route(top)
    want = torch.zeros(moe.EXPERTS, cap, dtype=torch.bool)
    want[0], want[2] = True, True
    assert torch.equal(filled.reshape(moe.EXPERTS, cap), want)
    assert token.reshape(moe.EXPERTS, cap)[0].tolist() == list(range(cap))  # (token cap is dropped)
    assert token.reshape(moe.EXPERTS, cap)[2].tolist() == list(range(cap))
    assert pick.reshape(moe.EXPERTS, cap)[0].tolist() == [2 * t for t in range(cap)]
    assert pick.reshape(moe.EXPERTS, cap)[2].tolist() == [2 * t + 1 for t in range(cap)]


def test_the_exported_programs_outputs_must_be_the_eager_models_bit_for_bit():
    """``exported.holds``, the check of the workload's result besides its trace, can fail: one
    bfloat16 element one ulp off is a difference."""
    from fp8ref.harness.workloads import exported

    want = [torch.ones(2, 3, dtype=torch.bfloat16) for _ in exported.BATCHES]
    off = [t.clone() for t in want]
    off[-1].view(torch.int16)[0, 0] += 1
    assert exported.holds({"loaded": want, "eager": [t.clone() for t in want]}) is None
    assert "not the eager model's" in str(exported.holds({"loaded": off, "eager": want}))


@pytest.mark.slow
@ON_DEVICES
@pytest.mark.parametrize("name", [n for n, w in WORKLOADS.items() if w.compiled])
def test_a_compiled_workloads_regions_give_its_eager_outputs_bit_for_bit(
    name, device, skip_if_refused, record_observation, fresh_dynamo
):
    """The workload run again with its torch.compile regions compiled (the tracer runs them
    eagerly, ``trace.compiled``): every region's output and float8 codes must be the eager
    trace's, each op of which was held to the definition; what ran inside generated kernels is
    named as checked at the regions' boundary only. Why it may fail: inductor fusing the cast
    with another rounding, or computing the scale another way, than the eager ops."""
    from fp8ref.harness.trace.compiled import compare_compiled
    from fp8ref.harness.workloads import tiny
    from fp8ref.harness.workloads.compiled import compiled_refusal

    workload = WORKLOADS[name]
    refusal = workload.refusal(device) or compiled_refusal(device)
    skip_if_refused(refusal, f"the {name} workload compiled on {device} ({workload.what})")
    with tiny.on(device):
        boundary = compare_compiled(workload.run, eager=traced(name, device))
    for (op, kind), n in sorted(boundary.unseen.items()):
        record_observation(
            f"workload {name} on {device}: {op} ({kind})", f"x{n} inside compiled code: checked at the boundary"
        )
    assert not boundary.problems(), "\n".join(boundary.problems())
    calls = workload.expects[("aten._scaled_mm.default", "scaled_mm")]  # (one region call per FP8 linear)
    assert sum(boundary.regions.values()) == calls, f"{name}: regions compared {boundary.regions}, want {calls} calls"
    assert boundary.unseen, f"{name}: the compiled run showed every FP8 call: were the regions compiled at all?"


def test_a_workloads_result_that_breaks_its_holds_fails_its_check(skip_if_refused):
    """``check`` holds the run's result to ``Workload.holds`` (the exported program against its
    eager model), and the profile's value says so too; exporting ran on fake tensors (staged)."""
    import dataclasses

    from fp8ref.harness.workloads.profile_keys import value

    workload = WORKLOADS["exported"]
    skip_if_refused(workload.refusal("cpu"), f"the exported workload ({workload.what})")
    got = traced("exported")
    assert got.staged > 0, "torch.export ran no op on fake tensors under the tracer"
    broken = dataclasses.replace(workload, holds=lambda result: "the loaded program's output differs")
    assert "the loaded program's output differs" in str(check(broken, got))
    assert value(got, broken).endswith("; the loaded program's output differs")


def test_a_workload_device_is_named_and_undone_after_its_block(monkeypatch):
    """``tiny.on`` sets where a CUDA twin builds its model and batches, for its block only (shown
    with the meta device standing in for CUDA, which this check may not have); a device that is
    not one is a clear error naming the argument."""
    from fp8ref.harness.workloads import tiny

    with pytest.raises(ValueError, match="device: expected 'cpu' or 'cuda"):
        with tiny.on("gpu"):
            pass
    monkeypatch.setattr(tiny, "device_kind", lambda where: where)
    with tiny.on("meta"):
        assert tiny.device() == "meta"
        assert {p.device.type for p in tiny.mlp().parameters()} == {"meta"}
        assert {t.device.type for t in tiny.batch(0)} == {"meta"}
    assert tiny.device() == "cpu" and tiny.batch(0)[0].device.type == "cpu"
