"""FSDP2 (``fully_shard``) with torchao's float8 all-gather, on the CPU through gloo, against the
same model trained unsharded. Writes one ``torch.save`` file that tests/cpu/install/test_fsdp_float8.py
reads; it asserts nothing itself.

Usage: python tests/scripts/fsdp_float8.py OUT.pt [STEPS]

What runs, in one process group of two ranks (torch.multiprocessing, forked from this process on
Linux, a rendezvous file beside OUT):
- ``unsharded``: the float8 model (torchao ``convert_to_float8_training``, ``emulate=True``, no
  FSDP), trained in this process; its weights are recorded before every step;
- ``fsdp1``: the same model sharded over a one-rank mesh (rank 0 alone);
- ``fsdp2``: sharded over both ranks; every rank gets the same batch, so the reduce-scatter's mean
  of identical gradients is exact and the run can match the unsharded one bitwise;
- ``fsdp1_mixed`` / ``fsdp2_mixed``: one rank / both ranks with a MixedPrecisionPolicy
  (bfloat16 parameters, float32 reduction), the first layer initialised 1e-4 times smaller (its
  float8 scale above float16's max); the one-rank run is the unsharded model under that policy;
- ``fsdp2_uneven``: both ranks, a hidden width of 127, so the first weight's dim 0 splits 64 + 63;
  ``unsharded_uneven`` is that model trained alone. It runs last, after the others are saved: an
  install may abort the processes there, which is then recorded as its result (``error``, and
  ``signal``: the signal that ended a rank, e.g. ``SIGABRT``, or None);
- ``fsdp2_float8_only``: both ranks, each Linear without bias, so an FSDP group holds float8
  weights alone (with torch 2.13 + torchao 0.18, gloo refuses that all-gather);
- ``fsdp2_dcp``: the fsdp2 model saved after 2 steps through torch.distributed.checkpoint on both
  ranks, loaded into a zeroed model sharded over both ranks and, on rank 0 alone, into a zeroed
  unsharded one, each trained to the end (``dcp_run``);
- ``tp2``: tensor parallel over both ranks, the first Linear ``Float8ColwiseParallel``, the
  second ``Float8RowwiseParallel`` (no bias), one forward and backward, against ``tp_reference``
  (the same model unsharded, with the hidden activation and its gradient recorded for bounds).
Each sharded run records its losses, final weights and gradients, every float8 all-gather's
output (the uint8 codes and the scale torchao's ``fsdp_post_all_gather`` receives; whether FSDP
passed a reused buffer), and the scales ``precompute_float8_dynamic_scale_for_fsdp`` set after each
step. A run that raises records the error instead, and the other runs go on.
"""

import os
import re
import shutil
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

D_IN, D_HIDDEN, D_OUT, BATCH, LR = 64, 128, 32, 16, 0.1


def build(bias: bool, hidden: int = D_HIDDEN, small_first: bool = False) -> Any:
    """The float8 MLP. ``hidden``: an odd width gives the first weight a dim 0 two ranks cannot
    split evenly. ``small_first``: the first layer initialised 1e-4 times smaller, so its amax is
    below 448 / 65504 and its scale above float16's max."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(D_IN, hidden, bias=bias), torch.nn.ReLU(), torch.nn.Linear(hidden, D_OUT, bias=bias)
    )
    if small_first:
        with torch.no_grad():
            model[0].get_parameter("weight").mul_(1e-4)
    # enable_fsdp_float8_all_gather only changes what FSDP gathers; unsharded it is the same model
    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True, emulate=True)
    return convert_to_float8_training(model, config=config)


def batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, D_IN, generator=gen), torch.randn(BATCH, D_OUT, generator=gen)) for _ in range(steps)]


def linears(model: Any) -> list[Any]:
    return [m for m in model if isinstance(m, torch.nn.Linear)]


def train(
    model: Any,
    steps: int,
    after_step: Callable[[Any], None] | None = None,
    before_step: Callable[[Any], None] | None = None,
    first: int = 0,
) -> dict:
    """Steps ``first`` .. ``steps - 1`` of plain SGD (no optimizer state, so a run resumed from its
    weights alone continues exactly)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], {}
    for x, y in batches(steps)[first:]:
        if before_step is not None:
            before_step(model)
        loss = torch.nn.functional.mse_loss(model(x).float(), y)  # (a bfloat16 output under mixed precision)
        loss.backward()
        grads = {name: _full(p.grad) for name, p in model.named_parameters()}
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if after_step is not None:
            after_step(model)
    return {"losses": losses, "grads": grads, "weights": {k: _full(v) for k, v in model.state_dict().items()}}


def _full(t: torch.Tensor | None) -> torch.Tensor:
    assert t is not None, "a gradient that should exist is None"
    t = t.full_tensor() if hasattr(t, "full_tensor") else t
    return t.detach().clone()


_GATHERS: list = []  # the running run's records (one spy per process, installed once)


def _spy_all_gathers() -> None:
    """Record what torchao's float8 all-gather hands back to FSDP: codes, scale, reused buffer."""
    from torchao.float8 import fsdp_utils

    cls = fsdp_utils.WeightWithDynamicFloat8CastTensor
    original = cls.fsdp_post_all_gather

    def post_all_gather(self, outputs, metadata, param_dtype, *, out=None):
        (data,), (scale,) = outputs, metadata
        _GATHERS.append(
            {
                "dtype": str(data.dtype),
                "codes": data.view(torch.uint8).clone(),
                "scale": scale.clone(),
                "reused_buffer": out is not None,
            }
        )
        return original(self, outputs, metadata, param_dtype, out=out)

    cls.fsdp_post_all_gather = post_all_gather


def sharded_run(name: str, bias: bool, mesh: Any, steps: int, rank: int, mixed: bool = False, **shape: Any) -> dict:
    """``mixed``: FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32). The
    full float32 master weights before every step are recorded (``weights_before_step``)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torchao.float8.fsdp_utils import precompute_float8_dynamic_scale_for_fsdp

    _GATHERS.clear()
    scales: list = []
    before: list = []

    def after_step(model):
        precompute_float8_dynamic_scale_for_fsdp(model)
        scales.append([lin.weight._local_tensor._precomputed_scale.clone() for lin in linears(model)])

    def before_step(model):
        before.append([_full(lin.weight) for lin in linears(model)])

    try:
        model = build(bias, **shape)
        bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        policy = bf16 if mixed else MixedPrecisionPolicy()  # (the default: no casts)
        for lin in linears(model):
            fully_shard(lin, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        out = train(model, steps, after_step=after_step, before_step=before_step)
        out.update(all_gathers=list(_GATHERS), precomputed_scales=scales, weights_before_step=before)
    except Exception as exc:  # noqa: BLE001 - recorded: the test decides whether it is a refusal
        out = {
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            "traceback": traceback.format_exc()[-3000:],
        }
    return out


def _shard(model: Any, mesh: Any) -> Any:
    from torch.distributed.fsdp import fully_shard

    for lin in linears(model):
        fully_shard(lin, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _zeroed(model: Any) -> Any:
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model


def dcp_run(mesh: Any, steps: int, rank: int, folder: str, at: int = 2) -> dict:
    """``fsdp2_dcp``: the fsdp2 model trained ``at`` steps, its sharded state saved through
    torch.distributed.checkpoint on both ranks, then loaded in place into a zeroed model sharded
    over both ranks (``two``: the rest of the steps trained there) and, on rank 0 alone, into a
    zeroed unsharded model (``one``). Each records the losses of the resumed steps and the final
    weights; an error is recorded instead."""
    import warnings

    import torch.distributed.checkpoint as dcp

    out: dict = {}
    warnings.simplefilter("ignore")  # (DCP's notes on single-process loads and storage classes)
    try:
        model = _shard(build(True), mesh)
        train(model, at)
        dcp.save({"model": model.state_dict()}, checkpoint_id=folder)
        fresh = _zeroed(_shard(build(True), mesh))
        state = {"model": fresh.state_dict()}
        dcp.load(state, checkpoint_id=folder)
        fresh.load_state_dict(state["model"])
        rest = train(fresh, steps, first=at)
        out["two"] = {"losses": rest["losses"], "weights": rest["weights"]}
    except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException: recorded
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        out["traceback"] = traceback.format_exc()[-3000:]
    dist.barrier()
    if rank == 0 and "error" not in out:
        try:
            alone = _zeroed(build(True))
            state = {"model": alone.state_dict()}
            dcp.load(state, checkpoint_id=folder, no_dist=True)
            alone.load_state_dict(state["model"])
            rest = train(alone, steps, first=at)
            out["one"] = {"losses": rest["losses"], "weights": rest["weights"]}
        except BaseException as exc:  # noqa: BLE001 - as above
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            out["one_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    out["at"] = at
    return out


def tp_problem() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(2)
    return torch.randn(BATCH, D_IN, generator=gen), torch.randn(BATCH, D_OUT, generator=gen)


def tp_reference() -> dict:
    """The unsharded no-bias model, one forward and backward, with the hidden activation (the
    second Linear's input) and its gradient."""
    model = build(False)
    x, grad = tp_problem()
    x.requires_grad_()
    seen: dict = {}

    def keep(module, args, output):
        seen["hidden"] = args[0].detach().clone()
        args[0].register_hook(lambda g: seen.__setitem__("grad_hidden", g.detach().clone()))

    model[2].register_forward_hook(keep)
    out = model(x)
    out.backward(grad)
    return {
        "out": out.detach(),
        "grad_x": _full(x.grad),
        "w1": model[0].weight.detach(),
        "w2": model[2].weight.detach(),
        "grads": {n: p.grad.detach() for n, p in model.named_parameters()},
        **seen,
    }


def tp_run(mesh: Any) -> dict:
    from torch.distributed.tensor.parallel import parallelize_module
    from torchao.float8.float8_tensor_parallel import Float8ColwiseParallel, Float8RowwiseParallel

    try:
        model = build(False)
        parallelize_module(model, mesh, {"0": Float8ColwiseParallel(), "2": Float8RowwiseParallel()})
        x, grad = tp_problem()
        x.requires_grad_()
        out = model(x)
        out.backward(grad)
        return {
            "out": _full(out),
            "grad_x": _full(x.grad),
            "grads": {n: _full(p.grad) for n, p in model.named_parameters()},
        }
    except Exception as exc:  # noqa: BLE001 - recorded: the test decides whether it is a refusal
        return {
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            "traceback": traceback.format_exc()[-3000:],
        }


def worker(rank: int, world: int, rendezvous: str, steps: int, out_dir: str) -> None:
    from torch.distributed.device_mesh import DeviceMesh

    torch.set_num_threads(1)
    _spy_all_gathers()
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    results = {}
    solo = dist.new_group([0])
    if rank == 0:
        one = DeviceMesh.from_group(solo, "cpu")
        results["fsdp1"] = sharded_run("fsdp1", True, one, steps, rank)
        results["fsdp1_mixed"] = sharded_run("fsdp1_mixed", True, one, steps, rank, mixed=True, small_first=True)
    dist.barrier()
    both = DeviceMesh("cpu", list(range(world)))
    results["fsdp2"] = sharded_run("fsdp2", True, both, steps, rank)
    dist.barrier()
    results["fsdp2_mixed"] = sharded_run("fsdp2_mixed", True, both, steps, rank, mixed=True, small_first=True)

    dist.barrier()
    results["fsdp2_float8_only"] = sharded_run("fsdp2_float8_only", False, both, steps, rank)
    dist.barrier()
    results["tp2"] = tp_run(both)
    dist.barrier()
    results["fsdp2_dcp"] = dcp_run(both, steps, rank, os.path.join(out_dir, "dcp"))
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    # last, with everything else saved: an install may abort the process here (a collective whose
    # sizes disagree), and then only this run is lost
    dist.barrier()
    uneven = sharded_run("fsdp2_uneven", True, both, steps, rank, hidden=D_HIDDEN - 1)
    torch.save(uneven, os.path.join(out_dir, f"uneven-rank{rank}.pt"))
    dist.destroy_process_group()


def main(out: str, steps: int = 3) -> None:
    torch.set_num_threads(1)
    before: list = []
    reference = train(
        build(True), steps, before_step=lambda m: before.append([lin.weight.detach().clone() for lin in linears(m)])
    )
    reference["weights_before_step"] = before
    without_bias = train(build(False), steps)  # what fsdp2_float8_only would match, where it runs
    uneven = train(build(True, hidden=D_HIDDEN - 1), steps)  # what fsdp2_uneven must match
    out_dir = os.path.dirname(os.path.abspath(out))
    rendezvous = os.path.join(out_dir, "rendezvous")
    for name in ("rendezvous", "rank0.pt", "rank1.pt", "uneven-rank0.pt", "uneven-rank1.pt"):
        if os.path.exists(os.path.join(out_dir, name)):
            os.unlink(os.path.join(out_dir, name))
    shutil.rmtree(os.path.join(out_dir, "dcp"), ignore_errors=True)
    crashed: dict | None = None
    try:
        # forked on Linux: each rank starts from this interpreter's imports (torch, torchao) instead
        # of paying them again (the script's CPU time about halves: docs/timings.md). Safe here:
        # torch computes on one thread (above), so it has no OpenMP pool to copy, no process group
        # or CUDA context exists yet, and the thread numpy's OpenBLAS starts handles a fork.
        # Elsewhere spawned: Windows has no fork, and macOS documents it as unsafe.
        method = "fork" if sys.platform.startswith("linux") else "spawn"
        mp.start_processes(worker, args=(2, rendezvous, steps, out_dir), nprocs=2, join=True, start_method=method)
    except Exception as exc:  # noqa: BLE001 - a rank killed by the install: recorded, not raised
        # the signal that ended a rank (torch.multiprocessing's ProcessExitedException), or None
        found = re.search(r"terminated with signal (\w+)", str(exc))
        signal_name = getattr(exc, "signal_name", None) or (found.group(1) if found else None)
        crashed = {"error": f"crashed: {type(exc).__name__}: {exc}", "signal": signal_name}
    paths = [os.path.join(out_dir, f"rank{r}.pt") for r in range(2)]
    if not all(os.path.exists(p) for p in paths):
        raise SystemExit(f"the two-rank runs: {crashed['error'] if crashed else 'no results written'}")
    ranks = [torch.load(p, weights_only=False) for p in paths]
    for r, rank in enumerate(ranks):
        path = os.path.join(out_dir, f"uneven-rank{r}.pt")
        rank["fsdp2_uneven"] = torch.load(path, weights_only=False) if crashed is None else dict(crashed)
    torch.save(
        {
            "unsharded": reference,
            "unsharded_without_bias": without_bias,
            "unsharded_uneven": uneven,
            "tp_reference": tp_reference(),
            "ranks": ranks,
            "steps": steps,
            "versions": {"torch": torch.__version__, "torchao": __import__("torchao").__version__},
        },
        out,
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
