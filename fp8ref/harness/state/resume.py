"""A model converted for float8 training, checkpointed and resumed: it must continue bitwise as
the uninterrupted run. Shared by tests/cpu/install/test_checkpoints.py and tests/meta (which
passes a checkpoint that loses something on the way). How single tensors are kept:
fp8ref.harness.state.keeping."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from .keeping import KNOWN_KEEP_FAILURES, check_kept, dcp_saved_and_loaded, saved_and_loaded


# --- resume --------------------------------------------------------------------------------------
def _batches(n: int, seed: int = 7) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(n):
        yield torch.randn(32, 64, generator=gen), torch.randn(32, 64, generator=gen)


def converted_model(recipe: str, seed: int) -> torch.nn.Module:
    """A two-layer MLP (float32 master weights) converted for torchao float8 training."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    return convert_to_float8_training(m, config=Float8LinearConfig.from_recipe_name(recipe))


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return float(loss.detach())


def _optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)


def check_resume(
    recipe: str,
    steps: int = 6,
    at: int = 3,
    save: Callable[[dict], dict] | None = None,
) -> str | None:
    """Train ``steps`` steps uninterrupted; and ``at`` steps, checkpoint model and optimizer
    (``save``: a checkpoint dict -> the dict read back; default torch.save/load through memory),
    load both into a freshly converted model built from another seed, and train the rest. The
    losses and the final weights must be bitwise those of the uninterrupted run."""
    keep = save or saved_and_loaded
    data = list(_batches(steps))
    model = converted_model(recipe, seed=0)
    opt = _optimizer(model)
    straight = [_step(model, opt, x, y) for x, y in data]

    first = converted_model(recipe, seed=0)
    opt1 = _optimizer(first)
    resumed = [_step(first, opt1, x, y) for x, y in data[:at]]
    ckpt = keep({"model": first.state_dict(), "optim": opt1.state_dict()})
    fresh = converted_model(recipe, seed=1)
    opt2 = _optimizer(fresh)
    fresh.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    resumed += [_step(fresh, opt2, x, y) for x, y in data[at:]]
    if resumed != straight:
        i = next(i for i, (a, b) in enumerate(zip(resumed, straight)) if a != b)
        return f"{recipe}: resumed at step {at}, the loss of step {i} is {resumed[i]!r}, uninterrupted {straight[i]!r}"
    for (name, p), q in zip(model.state_dict().items(), fresh.state_dict().values()):
        if not torch.equal(p.view(torch.uint8), q.view(torch.uint8)):
            return f"{recipe}: resumed at step {at}, final {name} differs in {int((p != q).sum())} elements"
    return None


def through_dcp(ckpt: dict) -> dict:
    """A checkpoint through torch.distributed.checkpoint in one process: saved, then loaded in
    place into a state dict of the same structure whose tensors are zeroed (as a resumed run
    loads into the state dicts of a freshly built model and optimizer), which comes back."""

    def twin(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return torch.zeros_like(value)
        if isinstance(value, dict):
            return {k: twin(v) for k, v in value.items()}
        if isinstance(value, list):
            return [twin(v) for v in value]
        return value

    return dcp_saved_and_loaded(ckpt, twin(ckpt))


REQUIRED = ("torch.save/load", "tensor_flatten/unflatten")  # what torch.compile and DCP rely on


def kept_problem(t: torch.Tensor, what: str, record_observation: Callable[[str, str], None]) -> str | None:
    """``t`` through every way of keeping it (fp8ref.harness.state.keeping), each refusal recorded:
    None when no field is lost and none of ``REQUIRED`` is refused, else what went wrong."""
    r = check_kept(t)
    for way, why in r.refused.items():
        record_observation(f"{what} through {way}", why)
    for way, why in r.known.items():  # (a failure named with its versions: keeping.KNOWN_KEEP_FAILURES)
        record_observation(f"{what} through {way}", f"{why} (known: {KNOWN_KEEP_FAILURES[(way, str(t.dtype))][1]})")
    if r.problems:
        return "\n".join(r.problems)
    if set(REQUIRED) & set(r.refused):
        return str(r.refused)
    return None
