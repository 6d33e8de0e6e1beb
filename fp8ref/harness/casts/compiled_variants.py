"""A program compiled every way inductor may compile it: each mode, and on CUDA each launch
configuration its autotuner tries, not only the one that wins.

Why each candidate: under ``max-autotune`` inductor's Triton pointwise kernels get a list of
launch configurations (``torch/_inductor/runtime/triton_heuristics.py: pointwise``: a 2-D tiled
kernel, such as a transposed store, tries 32x32, 64x64, 256x16, 16x256, (bs, 1) and (1, bs)
blocks; a 1-D one two block sizes), benchmarks them on the first call and keeps the fastest.
Which one wins depends on timing, so it differs from run to run and from machine to machine: a
miscompile under one configuration (mid-2026: Triton's transposed 1-byte stores wrote garbage
FP8 bytes in about a quarter of compiled float8 training runs) shows up only in the runs where
that configuration wins. Checking the winner of one run is a coin toss; checking every
candidate is not.

How each candidate runs (``forced_candidates``): inductor's generated code launches each kernel
through ``CachingAutotuner.run``, which benchmarks ``self.launchers`` (one per configuration
that compiled) when there is more than one and keeps the best. While the context is open, that
method is wrapped: on a kernel's first call its launchers are remembered, and each call keeps
only the one at the sweep's index (a kernel with fewer candidates runs its last), so the program
runs with the candidate forced, no benchmark and no choice. The sweep runs index 0, 1, ... up to
the largest count any kernel had, so each kernel's every candidate writes a real output once.
Compiled with ``max_autotune`` (the candidate list that mode builds), without coordinate descent
(it would tune away from the forced launcher) and without CUDA graphs (a replayed graph would
not call ``run``), inductor's caches off (a cached winner would leave one candidate). A sweep
that forced no kernel, or found one configuration per kernel, raises: it would otherwise pass
having checked nothing beyond the default.

What is not swept: the neighbours coordinate descent benchmarks from the winner (``mode=
"max-autotune"`` turns it on) are checked only when they win, through the ``max-autotune`` run
itself, which compiles exactly as a user does (CUDA graphs and coordinate descent on).

On the CPU inductor's C++ backend autotunes no pointwise kernel (``max_autotune`` selects GEMM
templates only), so there is no candidate list: the CPU variants are the options its pointwise
code generation honours, each compiled once: the default (vectorized, transposes done in
32x32 tiles with tails, ``CppTile2DKernel``), ``max-autotune`` (the mode a user passes; the same
kernels) and ``cpp.simdlen=1`` (plain scalar loops).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = [
    "Variant",
    "Sweep",
    "variants",
    "compile_variant",
    "describe_config",
    "forcing_run",
    "forced_candidates",
    "each_compiled_run",
]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of compiling: a ``torch.compile`` mode, or inductor options; ``sweep`` when each
    autotune candidate runs in turn (``forced_candidates``)."""

    label: str
    mode: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    sweep: bool = False


# The options of the CUDA sweep: max-autotune's candidate lists, nothing that moves away from the
# forced launcher (coordinate descent) or stops calling it (CUDA graphs).
_SWEEP_OPTIONS = (
    ("max_autotune", True),
    ("max_autotune_pointwise", True),
    ("coordinate_descent_tuning", False),
    ("triton.cudagraphs", False),
)


def variants(device: str) -> tuple[Variant, ...]:
    """The ways ``each_compiled_run`` compiles a program on ``device`` ("cpu" or "cuda")."""
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        kind = None
    if kind == "cuda":
        return (
            Variant("default"),
            Variant("max-autotune", mode="max-autotune"),
            Variant("max-autotune, each candidate", options=_SWEEP_OPTIONS, sweep=True),
        )
    if kind == "cpu":
        return (
            Variant("default"),
            Variant("max-autotune", mode="max-autotune"),
            Variant("cpp.simdlen=1 (scalar loops)", options=(("cpp.simdlen", 1),)),
        )
    raise ValueError(f"device: expected 'cpu' or 'cuda', got {device!r}")


def compile_variant(fn: Callable[..., Any], variant: Variant) -> Callable[..., Any]:
    """``fn`` compiled whole (``fullgraph``: a graph break would run part of it eagerly), with
    static shapes, as ``variant`` says."""
    kwargs: dict[str, Any] = {"fullgraph": True, "dynamic": False}
    if variant.mode is not None:
        kwargs["mode"] = variant.mode
    if variant.options:
        kwargs["options"] = dict(variant.options)
    return torch.compile(fn, **kwargs)


@dataclasses.dataclass
class Sweep:
    """What a sweep saw: each kernel's candidate configurations (``kernels``: name -> their
    descriptions, in inductor's order) and which one ran in the current run (``ran``)."""

    index: int = 0
    kernels: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    ran: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def runs(self) -> int:
        """How many runs it takes for every kernel's every candidate to run once."""
        return max((len(c) for c in self.kernels.values()), default=1)

    def describe(self) -> str:
        """This run's forced configuration of each kernel, e.g. ``triton_poi_fused_0: candidate
        3 of 6 (XBLOCK: 16, YBLOCK: 256, num_warps: 4, num_stages: 1)``."""
        if not self.ran:
            return "no autotuned kernel ran"
        return "; ".join(
            f"{name}: candidate {i + 1} of {len(self.kernels[name])} ({self.kernels[name][i]})"
            for name, i in self.ran.items()
        )


def describe_config(config: Any) -> str:
    """A Triton ``Config`` in words: its block sizes, warps and stages."""
    words = [f"{k}: {v}" for k, v in sorted(getattr(config, "kwargs", {}).items())]
    for attr in ("num_warps", "num_stages"):
        if getattr(config, attr, None) is not None:
            words.append(f"{attr}: {getattr(config, attr)}")
    return ", ".join(words) if words else repr(config)


def _kernel_name(autotuner: Any) -> str:
    meta = getattr(autotuner, "inductor_meta", None) or {}
    fn = getattr(autotuner, "fn", None)
    return str(meta.get("kernel_name") or getattr(fn, "__name__", None) or type(autotuner).__name__)


def forcing_run(original: Callable[..., Any], sweep: Sweep) -> Callable[..., Any]:
    """A replacement for an autotuner class's ``run``: each kernel launches the candidate at
    ``sweep.index`` (its last, when it has fewer), recorded in ``sweep``, instead of benchmarking
    its candidates. ``original`` is the class's own ``run``; it still launches, with one launcher
    left it neither benchmarks nor chooses."""

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The launchers as inductor built them, before any run: the sweep's options are its own,
        # so no unforced run in this process compiled (and autotuned) the same kernel source,
        # which inductor would hand back as the same module, its launchers already cut to one.
        candidates = self.__dict__.get("_fp8ref_candidates")
        if candidates is None:
            if not self.launchers:  # compiled lazily: what run itself would do first
                self.precompile()
            candidates = list(self.launchers)
            self._fp8ref_candidates = candidates
        sweep.kernels.setdefault(_kernel_name(self), [describe_config(c.config) for c in candidates])
        i = min(sweep.index, len(candidates) - 1)
        self.launchers = [candidates[i]]
        if "_cached_launcher" in self.__dict__:  # torch >= 2.13's fast path would replay the last one
            self._cached_launcher = None
        sweep.ran[_kernel_name(self)] = i
        return original(self, *args, **kwargs)

    return run


def _autotuner_class() -> type:
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    return CachingAutotuner


@contextlib.contextmanager
def forced_candidates(sweep: Sweep, autotuner: type | None = None) -> Iterator[Sweep]:
    """While open, every kernel of ``autotuner`` (inductor's ``CachingAutotuner``, by default)
    launches the candidate ``sweep.index`` says (``forcing_run``); restored on exit."""
    cls: Any = autotuner if autotuner is not None else _autotuner_class()
    original = cls.run
    cls.run = forcing_run(original, sweep)
    try:
        yield sweep
    finally:
        cls.run = original


def _class_name(autotuner: type | None) -> str:
    return (autotuner if autotuner is not None else _autotuner_class()).__name__


def _fresh() -> None:
    import torch._dynamo

    torch._dynamo.reset()


def _no_caches() -> contextlib.AbstractContextManager[Any]:
    """Inductor's caches off for the compile: a graph or an autotune winner cached by an earlier
    run would bring one configuration where the sweep needs them all."""
    import torch._inductor.config as inductor_config

    wanted = {"force_disable_caches": True, "autotune_local_cache": False, "autotune_remote_cache": False}
    return inductor_config.patch({k: v for k, v in wanted.items() if hasattr(inductor_config, k)})


def _snapshot(out: Any) -> Any:
    """A copy of what a compiled call returned: a CUDA graph's outputs are overwritten by its next
    replay."""
    if isinstance(out, torch.Tensor):
        return out.detach().clone(memory_format=torch.preserve_format)
    if isinstance(out, (tuple, list)):
        return type(out)(_snapshot(o) for o in out)
    return out


def each_compiled_run(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    device: str,
    *,
    only: tuple[str, ...] | None = None,
    autotuner: type | None = None,
) -> Iterator[tuple[str, Any]]:
    """Compile ``fn`` each way ``variants(device)`` lists (``only``: those labels alone) and call
    it on ``args``: yields (label, output) per run; a sweep yields one run per candidate index,
    its label naming each kernel's forced configuration. Dynamo is reset before each compile."""
    for variant in variants(device):
        if only is not None and variant.label not in only:
            continue
        _fresh()
        if not variant.sweep:
            with _no_caches() if torch.device(device).type == "cuda" else contextlib.nullcontext():
                compiled = compile_variant(fn, variant)
                yield variant.label, _snapshot(compiled(*args))
            continue
        sweep = Sweep()
        with _no_caches(), forced_candidates(sweep, autotuner):
            compiled = compile_variant(fn, variant)
            while sweep.index < sweep.runs:
                sweep.ran.clear()
                out = _snapshot(compiled(*args))
                # nothing to force, or one configuration per kernel: a sweep that chose nothing
                # must not read as every configuration checked
                if not sweep.kernels:
                    raise RuntimeError(
                        f"{variant.label}: the compiled program launched no autotuned kernel "
                        f"({_class_name(autotuner)}.run was never called), so no launch configuration was checked"
                    )
                if sweep.runs == 1:
                    raise RuntimeError(
                        f"{variant.label}: each kernel had one launch configuration ({sweep.describe()}): "
                        "max-autotune listed no candidates to sweep on this torch"
                    )
                yield f"{variant.label}: {sweep.describe()}", out
                sweep.index += 1
    _fresh()
