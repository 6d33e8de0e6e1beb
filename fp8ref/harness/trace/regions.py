"""Each torch.compile region a program makes, recorded call by call: while ``regions_recorded``
is active, ``torch.compile(fn_or_module, ...)`` gives back the region (compiled, or ``fn`` itself
to run eagerly) with every call's outputs kept, under the region's name (what was compiled and
where it was defined) and the call's index. ``compare_regions`` holds two runs' regions to each
other output by output, bit for bit, so a region's float8 codes are compared even where the
program's result does not carry them. Regions compiled before the program ran (a decorator at
import) are not seen: the program's result alone holds them."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_map

from ..judge.stored import readable, snapshot

__all__ = ["RegionCall", "regions_recorded", "compare_regions"]


@dataclasses.dataclass(frozen=True)
class RegionCall:
    region: str  # ``_layer (fp8ref/harness/workloads/compiled.py:37)``
    call: int  # the region's n-th call in the run, from 0
    outputs: Any  # what it returned, its tensors detached copies on the CPU


def _name(model: Any) -> str:
    target = model.forward if isinstance(model, torch.nn.Module) else model
    name = getattr(model, "__qualname__", type(model).__qualname__)
    try:
        file, line = inspect.getsourcefile(target), inspect.getsourcelines(target)[1]
    except (TypeError, OSError):  # (a builtin, or code without a file)
        return name
    return f"{name} ({file}:{line})"


class _EagerRegion(torch.nn.Module):
    """A module's region run eagerly: a handle like torch.compile's (the module under
    ``_orig_mod``), so that only calls through the handle are recorded, as compiled."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self._orig_mod = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod(*args, **kwargs)


def _kept(value: Any) -> Any:
    """A region's inputs or outputs kept as they are now: each tensor's bytes copied as memory
    (``judge.stored.snapshot``, never ``clone``, a kernel under check), on the CPU."""

    def one(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        return snapshot(t.detach(), host=True) if readable(t) else t.detach().cpu().clone()

    return tree_map(one, value)


@contextlib.contextmanager
def regions_recorded(compiled: bool) -> Iterator[list[RegionCall]]:
    """``torch.compile`` made to record each region's calls into the list yielded; ``compiled``:
    the regions run compiled (torch's own ``torch.compile``), else eagerly."""
    real = torch.compile
    calls: list[RegionCall] = []
    counts: Counter[str] = Counter()
    made: Counter[str] = Counter()  # regions made of one function or module class: #2, #3, ...
    hooks: list[Any] = []

    def record(name: str, out: Any) -> None:
        with _disable_current_modes():  # (the copies kept are no op of the program a tracer should see)
            calls.append(RegionCall(name, counts[name], _kept(out)))
        counts[name] += 1

    def recording(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # (``@torch.compile(dynamic=True)``: the decorator, then the function)
            return lambda m: recording(m, **kwargs)
        name = _name(model)
        made[name] += 1
        name = name if made[name] == 1 else f"{name} #{made[name]}"
        if isinstance(model, torch.nn.Module):  # (a call of the module itself, not through the handle, is none)
            handle: torch.nn.Module = real(model, **kwargs) if compiled else _EagerRegion(model)  # type: ignore[assignment]
            hooks.append(handle.register_forward_hook(lambda mod, args, out: record(name, out)))
            return handle
        region = real(model, **kwargs) if compiled else model

        @functools.wraps(model)
        def called(*args: Any, **kw: Any) -> Any:
            out = region(*args, **kw)
            record(name, out)
            return out

        return called

    torch.compile = recording
    try:
        yield calls
    finally:
        torch.compile = real
        for hook in hooks:
            hook.remove()


def compare_regions(
    eager: list[RegionCall], compiled: list[RegionCall], differences: Callable[[Any, Any], list[str]]
) -> tuple[dict[str, int], list[str]]:
    """(calls compared per region; where a region's call differs, by ``differences(eager
    outputs, compiled outputs)``, or a region one run made a call of and the other did not)."""
    mine = {(c.region, c.call): c for c in compiled}
    out: list[str] = []
    compared: Counter[str] = Counter()
    for c in eager:
        other = mine.pop((c.region, c.call), None)
        if other is None:
            out.append(f"region {c.region}, call {c.call}: made eagerly, not compiled")
            continue
        compared[c.region] += 1
        out += [f"region {c.region}, call {c.call}: {d}" for d in differences(c.outputs, other.outputs)]
    out += [f"region {region}, call {call}: made compiled, not eagerly" for region, call in mine]
    return dict(compared), out
