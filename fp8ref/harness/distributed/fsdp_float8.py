"""The checks of FSDP2's float8 all-gather (tests/scripts/fsdp_float8.py's results) against the
unsharded model and fp8ref's reference cast, as functions that return what differs: used by
tests/cpu/install/test_fsdp_float8.py, and by tests/meta with deliberately broken results."""

from __future__ import annotations

import torch

from ...reference.formats import E4M3FN
from ...reference.quantize import quantize
from ...reference.scaling import tensorwise


def run_differences(run: dict, unsharded: dict) -> list[str]:
    """Where a sharded run's losses, last gradients or final weights differ from the unsharded
    run's, bitwise (every rank saw the same batches, so no arithmetic differs)."""
    out = (
        [f"losses: {run['losses']} vs unsharded {unsharded['losses']}"] if run["losses"] != unsharded["losses"] else []
    )
    for what in ("grads", "weights"):
        for name, want in unsharded[what].items():
            got = run[what].get(name)
            if got is None or not torch.equal(got, want):
                out.append(f"{what} {name}: differs from the unsharded run")
    return out


def resumed_differences(resumed: dict, unsharded: dict, at: int) -> list[str]:
    """Where a run resumed from a checkpoint after ``at`` steps differs from the unsharded run:
    the losses of the steps after ``at`` and the final weights, bitwise."""
    out = (
        []
        if resumed["losses"] == unsharded["losses"][at:]
        else [f"losses after step {at}: {resumed['losses']} vs unsharded {unsharded['losses'][at:]}"]
    )
    for name, want in unsharded["weights"].items():
        got = resumed["weights"].get(name)
        if got is None or not torch.equal(got, want):
            out.append(f"weights {name}: differs from the unsharded run")
    return out


def reference_cast(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8ref's tensorwise E4M3 cast of the full weight, in torchao's convention: (codes, scale)."""
    q = quantize(weight, E4M3FN, tensorwise())
    return q.codes, q.scale


def all_gather_differences(run: dict, weights_before_step: list[list[torch.Tensor]]) -> list[str]:
    """Every float8 all-gather of a run against fp8ref's cast of the full weight at that step:
    codes and scale bitwise. A step gathers each weight twice (forward, and again for backward
    after resharding); a gathered weight is told by its shape."""
    gathers, steps = run["all_gathers"], len(weights_before_step)
    if len(gathers) != 4 * steps:
        return [f"{len(gathers)} float8 all-gathers for {steps} steps of two weights, expected {4 * steps}"]
    out = []
    for i, g in enumerate(gathers):
        step = i // 4
        matches = [
            w
            for w in weights_before_step[step]
            if w.shape[0] <= g["codes"].shape[0] and w.shape[1:] == g["codes"].shape[1:]
        ]
        if len(matches) != 1:
            out.append(f"all-gather {i}: shape {tuple(g['codes'].shape)} matches no one weight")
            continue
        weight = matches[0]
        codes, scale = reference_cast(weight)
        got = g["codes"][: weight.shape[0]]  # (FSDP pads dim 0 to a multiple of the ranks)
        where = f"step {step}, weight {tuple(weight.shape)}, {'reused' if g['reused_buffer'] else 'new'} buffer"
        if not torch.equal(g["scale"].reshape(()), scale.reshape(())):
            out.append(f"all-gather {i} ({where}): scale {g['scale'].item()!r}, reference {scale.item()!r}")
        if not torch.equal(got, codes):
            bad = int((got != codes).sum())
            out.append(f"all-gather {i} ({where}): {bad} of {codes.numel()} codes differ from the reference cast")
    return out


def precomputed_scale_differences(run: dict, weights_after_step: list[list[torch.Tensor]]) -> list[str]:
    """The scales ``precompute_float8_dynamic_scale_for_fsdp`` set after each step against
    fp8ref's scale of each full weight then."""
    out = []
    for step, (scales, weights) in enumerate(zip(run["precomputed_scales"], weights_after_step)):
        for j, (got, weight) in enumerate(zip(scales, weights)):
            want = reference_cast(weight)[1]
            if not torch.equal(got.reshape(()).float(), want.reshape(())):
                out.append(f"step {step}, weight {j}: precomputed scale {got.item()!r}, reference {want.item()!r}")
    return out


def weights_after_steps(unsharded: dict) -> list[list[torch.Tensor]]:
    """The unsharded run's weights after each step: before the next one, and finally its last."""
    before = unsharded["weights_before_step"]
    last = [unsharded["weights"][k] for k in sorted(unsharded["weights"]) if k.endswith("weight")]
    return [*before[1:], last]


# The installs where FSDP2's float8 all-gather of uneven shards (tests/scripts/fsdp_float8.py's
# fsdp2_uneven: a 127-row weight over two gloo ranks, 64 + 63) aborts a rank: the collective's
# sizes disagree, gloo's enforce ("Received data size doesn't match expected size",
# gloo/transport/tcp/pair.cc) throws in a gloo thread and the process ends with SIGABRT; without
# float8 all-gather the same model runs. (torch release, torchao release) -> where it was seen.
UNEVEN_SHARDS_ABORT = {
    ("2.9.1", "0.17.0"): "CI's oldest install (2.9.1+cu128 on the CPU; recorded in the test, commit dae2e62)",
    ("2.13.0", "0.17.0"): "torch 2.13.0+cpu with torchao 0.17.0: process 1 terminated with signal SIGABRT "
    "(2026-12-03, scripts/your_env.py on that pair)",
    ("2.13.0", "0.18.0"): "torch 2.13.0+cpu: process 1 terminated with signal SIGABRT",
    ("2.14.1", "0.18.0"): "torch 2.14.1+cu130 on the CPU (what pip installs for a new user): process 1 terminated "
    "with signal SIGABRT (2026-12-02)",
    ("2.15.0", "0.18.0"): "CI's newest install (2.15.0+cu132 on the CPU; recorded in the test, commit dae2e62)",
}


def _release(version: str) -> str:
    return version.split("+")[0]  # a local build tag (+cpu, +cu128) is the same release


def uneven_shards_expected_to_abort(versions: dict) -> bool:
    """Whether the install ``versions`` (``{'torch': ..., 'torchao': ...}``) is one of
    ``UNEVEN_SHARDS_ABORT``."""
    return (_release(versions["torch"]), _release(versions["torchao"])) in UNEVEN_SHARDS_ABORT


def uneven_shards_problem(results: dict) -> str | None:
    """tests/scripts/fsdp_float8.py's uneven-shard runs against what this install is expected to do.
    On an install of ``UNEVEN_SHARDS_ABORT``: a rank ended by SIGABRT and nothing else (any other
    error is a failure, and a run that goes through means the expectation is stale). On any other:
    both ranks ran, each matching the unsharded model bitwise, every all-gather the reference cast."""
    versions = f"torch {results['versions']['torch']}, torchao {results['versions']['torchao']}"
    runs = [results["ranks"][r]["fsdp2_uneven"] for r in (0, 1)]
    failed = next((run for run in runs if "error" in run), None)
    if uneven_shards_expected_to_abort(results["versions"]):
        if failed is None:
            return (
                f"{versions}: FSDP2's float8 all-gather of uneven shards ran, where this install is expected to "
                "abort a gloo rank (SIGABRT): the expectation is stale. Check the run against the unsharded model "
                "and take this install out of fp8ref/harness/distributed/fsdp_float8.py's UNEVEN_SHARDS_ABORT"
            )
        if failed.get("signal") != "SIGABRT":
            return f"{versions}: uneven shards expected to abort a rank with SIGABRT, got: {failed['error']}"
        return None
    if failed is not None:
        known = ", ".join(f"torch {t} + torchao {a}" for t, a in UNEVEN_SHARDS_ABORT)
        return (
            f"{versions}: FSDP2's float8 all-gather of uneven shards failed: {failed['error']} "
            f"(expected to run here; known to abort on {known} only)"
        )
    diffs = []
    for rank, run in enumerate(runs):
        found = run_differences(run, results["unsharded_uneven"]) + all_gather_differences(
            run, run["weights_before_step"]
        )
        diffs += [f"rank {rank}: {d}" for d in found]
    return f"{versions}: uneven shards:\n" + "\n".join(diffs) if diffs else None
