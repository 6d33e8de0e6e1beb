"""FSDP2's float8 all-gather: a scale from one rank's shard, a gather not refreshed after the
optimizer step, bf16 on the wire, a cast of the bfloat16 parameter copy under a mixed-precision
policy, a precomputed scale rounded to float16 (a small weight's scale overflows it).

Deliberately broken stand-ins run through the same checks the suite holds torch and torchao to;
each must be reported (a fault that passes means a check went blind). ``test_catch_rate.py`` runs
every family again for the catch rate printed at the end of the run."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.distributed import fsdp_float8

# --- FSDP2 float8 all-gather, through fp8ref/harness/distributed/fsdp_float8 ------------------------------------------
# A sharded run as tests/scripts/fsdp_float8.py records it, built here from two steps of weights,
# with each fault as torchao's FSDP float8 path once had one.
FSDP_FAULTS = (
    "scale from the rank's shard",
    "stale all-gather after the optimizer step",
    "bf16 on the wire",
    "cast of the bfloat16 parameter copy (mixed precision)",
)


def _fsdp_run(fault: str | None) -> tuple[dict, list]:
    gen = torch.Generator().manual_seed(0)
    steps = [[torch.randn(8, 4, generator=gen) * (s + 1), torch.randn(2, 8, generator=gen)] for s in range(2)]
    gathers, scales = [], []
    for s, weights in enumerate(steps):
        for w in (weights[0], weights[1], weights[1], weights[0]):  # forward, then backward
            source = steps[0][0 if w.shape[0] == 8 else 1] if fault == FSDP_FAULTS[1] and s == 1 else w
            codes, scale = fsdp_float8.reference_cast(source)
            if fault == FSDP_FAULTS[0]:  # the amax of rank 0's half of the rows only
                codes, scale = fsdp_float8.reference_cast(source[: source.shape[0] // 2])
                codes = torch.cat([codes, codes])  # (each rank casts its shard with its own scale)
            if fault == FSDP_FAULTS[2]:
                codes = source.to(torch.bfloat16).view(torch.uint8).reshape(source.shape[0], -1)
            if fault == FSDP_FAULTS[3]:  # MixedPrecisionPolicy's bfloat16 copy cast, not the master weight
                codes, scale = fsdp_float8.reference_cast(source.to(torch.bfloat16).float())
            gathers.append({"codes": codes, "scale": scale, "reused_buffer": s == 1, "dtype": "torch.float8_e4m3fn"})
        shard_scales = [
            fsdp_float8.reference_cast(w[: w.shape[0] // 2] if fault == FSDP_FAULTS[0] else w)[1] for w in weights
        ]
        scales.append(shard_scales)
    return {"all_gathers": gathers, "precomputed_scales": scales[1:] + [scales[1]]}, steps


def fsdp_fault_caught(fault: str | None) -> bool:
    run, steps = _fsdp_run(fault)
    return bool(fsdp_float8.all_gather_differences(run, steps))


@pytest.mark.parametrize("fault", FSDP_FAULTS)
def test_fsdp_float8_all_gather_fault_is_caught(fault):
    assert not fsdp_fault_caught(None)
    assert fsdp_fault_caught(fault)


def test_a_precomputed_scale_from_a_shard_is_caught():
    run, steps = _fsdp_run(None)
    assert not fsdp_float8.precomputed_scale_differences(run, [steps[1], steps[1]])
    broken, _ = _fsdp_run(FSDP_FAULTS[0])
    assert fsdp_float8.precomputed_scale_differences(broken, [steps[1], steps[1]])


def test_a_precomputed_scale_through_float16_is_caught():
    """A small weight (amax below 448 / 65504): its scale overflows float16; one computed or kept
    in float16 is inf, one through bfloat16 is rounded: either differs from the reference."""
    small = [torch.randn(8, 4, generator=torch.Generator().manual_seed(1)) * 1e-4]
    want = fsdp_float8.reference_cast(small[0])[1]
    for dtype in (torch.float16, torch.bfloat16):
        run = {"precomputed_scales": [[want.to(dtype).float()]]}
        assert fsdp_float8.precomputed_scale_differences(run, [small]), dtype


# --- a sharded model through a distributed checkpoint, through fsdp_float8.resumed_differences ------
def _resumed(lost_shard: bool) -> tuple[dict, dict]:
    """An unsharded run of 3 steps and one resumed from its checkpoint after 2, faithful or with
    rank 1's half of the first weight brought back as zeros (a shard DCP did not read)."""
    gen = torch.Generator().manual_seed(1)
    weights = {"0.weight": torch.randn(8, 4, generator=gen), "2.weight": torch.randn(2, 8, generator=gen)}
    kept = {k: v.clone() for k, v in weights.items()}
    if lost_shard:
        kept["0.weight"][4:] = 0.0
    return {"losses": [0.8], "weights": kept}, {"losses": [1.0, 0.9, 0.8], "weights": weights}


def dcp_shard_fault_caught() -> bool:
    resumed, unsharded = _resumed(lost_shard=True)
    return bool(fsdp_float8.resumed_differences(resumed, unsharded, at=2))


def test_a_distributed_checkpoint_that_loses_a_shard_is_caught():
    assert not fsdp_float8.resumed_differences(*_resumed(lost_shard=False), at=2)
    assert dcp_shard_fault_caught()
