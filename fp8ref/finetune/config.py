"""One comparison's settings (``FinetuneConfig``), checked and completed from its preset."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import TypeVar

import torch

from ..reference.recipes import RECIPES, TORCHAO_RECIPES
from ..reference.validate import one_of
from .presets import FP8_BUDGET, MODEL_BUDGET, PRESETS

__all__ = ["FinetuneConfig", "ResourceUnavailable", "BACKENDS", "LOCAL_BUILDERS", "filled"]

T = TypeVar("T")

BACKENDS = ("torchao", "fp8ref")
# local dataset files by suffix -> the datasets builder that reads them
LOCAL_BUILDERS = {".txt": "text", ".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


def filled(value: T | None, name: str) -> T:
    """A field that ``FinetuneConfig.resolved()`` fills in: its value, or a ValueError naming it
    for a config that was not resolved."""
    if value is None:
        raise ValueError(f"{name}: not set; use FinetuneConfig.resolved(), which fills it from the preset")
    return value


class ResourceUnavailable(RuntimeError):
    """An opt-in model or dataset could not be loaded or cannot be trained on (no network, no such
    path, an empty or malformed local file, too little text): the message says which and why."""


@dataclasses.dataclass
class FinetuneConfig:
    """One comparison. ``None`` fields take the preset's value (``lr``: 1e-5 with ``model``)."""

    preset: str = "tiny"
    model: str | None = None
    dataset: str = "grammar"
    recipe: str = "tensorwise"
    backend: str = "torchao"
    steps: int | None = None
    seq_len: int | None = None
    batch: int | None = None
    lr: float | None = None
    layers: int | None = None
    warmup_steps: int | None = None
    weight_decay: float = 0.1
    max_grad_norm: float = 1.0
    compile: bool = False
    grad_checkpointing: bool = False
    seed: int = 0
    device: str = "cpu"
    # bf16 runs besides the first, each from the same weights with one element of every weight
    # matrix moved by one ulp: the run-to-run noise floor the FP8 gap is judged against
    noise_runs: int = 2
    # FP8's own allowance in the parity verdict (None: FP8_BUDGET of the preset; 0.01 for --model)
    fp8_budget: float | None = None
    # torchao backend: run the FP8 GEMMs as float32 matmuls of the cast values (Float8LinearConfig
    # emulate=True; the casts and scales are torchao's own, bitwise) instead of torch._scaled_mm.
    # None: emulate on CPU, where _scaled_mm either does the same in a fallback or, on CPUs with
    # AMX, calls oneDNN's FP8 matmul, whose reference kernel runs ~700x slower than bf16.
    emulate: bool | None = None

    def resolved(self) -> FinetuneConfig:
        """A validated copy with every ``None`` default filled in."""
        one_of(self.preset, sorted(PRESETS), "preset")
        one_of(self.backend, BACKENDS, "backend")
        allowed = TORCHAO_RECIPES if self.backend == "torchao" else tuple(RECIPES)
        if self.recipe not in allowed:
            raise ValueError(f"recipe: the {self.backend} backend takes one of {allowed}, got {self.recipe!r}")
        if self.dataset not in ("grammar", "wikitext"):
            if not os.path.isfile(self.dataset):
                raise ValueError(
                    f"dataset: expected 'grammar', 'wikitext' or an existing local file, got {self.dataset!r}"
                )
            if Path(self.dataset).suffix not in LOCAL_BUILDERS:
                raise ValueError(
                    f"dataset: a local file must end in one of {sorted(LOCAL_BUILDERS)}, got {self.dataset!r}"
                )
        p = PRESETS[self.preset]
        out = dataclasses.replace(
            self,
            steps=p.steps if self.steps is None else self.steps,
            seq_len=p.seq_len if self.seq_len is None else self.seq_len,
            batch=p.batch if self.batch is None else self.batch,
            lr=(p.lr if self.model is None else 1e-5) if self.lr is None else self.lr,
            layers=p.num_hidden_layers if self.layers is None else self.layers,
        )
        if out.fp8_budget is None:
            out.fp8_budget = FP8_BUDGET[self.preset] if self.model is None else MODEL_BUDGET
        for name in ("steps", "seq_len", "batch", "layers", "seed", "noise_runs"):
            v = getattr(out, name)
            low = 0 if name in ("seed", "noise_runs") else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"{name}: expected an int >= {low}, got {v!r}")
        if filled(out.seq_len, "seq_len") < 2:
            raise ValueError(f"seq_len: expected at least 2 (a next-token loss needs two), got {out.seq_len}")
        for name in ("lr", "weight_decay", "max_grad_norm", "fp8_budget"):
            v = getattr(out, name)
            if (
                not isinstance(v, (int, float))
                or isinstance(v, bool)
                or not math.isfinite(v)
                or v < 0
                or (name == "lr" and v == 0)
            ):
                raise ValueError(f"{name}: expected a finite number >= 0 (lr > 0), got {v!r}")
        if out.warmup_steps is None:
            out.warmup_steps = max(1, filled(out.steps, "steps") // 10)
        elif not isinstance(out.warmup_steps, int) or out.warmup_steps < 0:
            raise ValueError(f"warmup_steps: expected an int >= 0, got {out.warmup_steps!r}")
        try:
            dev = torch.device(out.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device: expected a torch device such as 'cpu' or 'cuda', got {out.device!r}") from exc
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device: {out.device!r} asked for, but torch.cuda.is_available() is False")
        if out.emulate is None:
            out.emulate = dev.type == "cpu"
        elif not isinstance(out.emulate, bool):
            raise ValueError(f"emulate: expected True, False or None, got {out.emulate!r}")
        return out

    @property
    def throughput_warmup(self) -> int:
        """Steps left out of tokens/s: compilation and allocator warm-up (fp8_parity.py used 10)."""
        return min(10, max(1, filled(self.steps, "steps") // 5))
