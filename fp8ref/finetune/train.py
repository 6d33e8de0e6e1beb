"""bf16 vs FP8 training of one causal LM: the same initial weights, data order, optimizer and
schedule twice, once in bf16 and once with FP8 linears, reporting the throughput ratio (where it
measures FP8 hardware: ``speed_note``) and the tail loss gap against bf16 runs one ulp apart (the
comparison fp8_parity.py's ``--full`` mode ran, made testable).

Defaults need no download: a Qwen3-architecture model built from a config (random init, presets
below) trained on ``fp8ref.finetune.corpus``'s grammar at byte level, whose entropy gives a known loss
floor. ``model=`` / ``dataset=`` opt into a pretrained model (``AutoModelForCausalLM``) and real
data (``datasets.load_dataset``); when they cannot be loaded, ``ResourceUnavailable`` says so.

FP8 comes from torchao's ``convert_to_float8_training`` (recipes tensorwise, rowwise,
rowwise_with_gw_hp) or from ``fp8ref.reference.emulate.convert`` (the emulated reference, any fp8ref
recipe), both behind fp8_parity.py's module filter (skip ``lm_head`` and Linears whose dims are not
multiples of 16). Heavy imports (transformers, datasets, torchao, matplotlib) stay inside functions.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import time
from collections.abc import Callable
from typing import Any

import torch

from ..harness.ao.torchao_compat import require_torchao
from ..harness.stack.install import package_version, versions
from ..reference.emulate import default_module_filter
from ..reference.validate import instance
from .config import FinetuneConfig, filled
from .corpus import ByteTokenizer
from .parity_rule import parity, tail_gap, tail_loss
from .presets import budget_source
from .report import budget_line, difference_line
from .sources import batches, fp8_checkpoint, preset_model, pretrained_model, pretrained_tokenizer

__all__ = ["compare", "calibrate", "nudge_weights", "convert_fp8", "speed_note", "RESULTS_SCHEMA"]

# 2: noise runs and the parity verdict; 3: the verdict's two statements (measurably different,
# within the budget), the noise interval and the budget's source; no speed figure for emulated FP8
RESULTS_SCHEMA = "fp8ref.finetune/3"


# --- FP8 conversion -------------------------------------------------------------------------------


def _linears(model: torch.nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if type(m) is torch.nn.Linear]


def convert_fp8(model: torch.nn.Module, cfg: FinetuneConfig) -> dict:
    """Swap the filtered Linears for FP8 ones; says which were converted and which kept."""
    before = set(_linears(model))
    if cfg.backend == "torchao":
        require_torchao()
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        config = dataclasses.replace(Float8LinearConfig.from_recipe_name(cfg.recipe), emulate=bool(cfg.emulate))
        convert_to_float8_training(model, config=config, module_filter_fn=default_module_filter)
    else:
        from ..reference.emulate import convert

        convert(model, cfg.recipe, module_filter_fn=default_module_filter)
    kept = set(_linears(model))
    if not before - kept:
        raise ValueError(f"model: no Linear passed the module filter, so the FP8 run would be bf16 ({sorted(before)})")
    return {"converted": len(before - kept), "kept_high_precision": sorted(kept)}


# --- training -------------------------------------------------------------------------------------

Progress = Callable[[str, int, int, float, "float | None"], None]


def _schedule(cfg: FinetuneConfig) -> Callable[[int], float]:
    """Linear warm-up, then cosine decay to 10% of the peak learning rate."""

    warmup, steps = filled(cfg.warmup_steps, "warmup_steps"), filled(cfg.steps, "steps")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))

    return factor


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _checksum(model: torch.nn.Module) -> float:
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters()))


def _train(
    model: torch.nn.Module, batches: torch.Tensor, cfg: FinetuneConfig, label: str, progress: Progress | None
) -> dict:
    device = torch.device(cfg.device)
    model.train()
    if cfg.grad_checkpointing:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ValueError(f"grad_checkpointing: {type(model).__name__} does not support it")
        # transformers 5.x renamed it activation_checkpointing_enable; the old name warns
        kind = "activation" if hasattr(model, "activation_checkpointing_enable") else "gradient"
        enable: Callable[..., Any] = getattr(model, f"{kind}_checkpointing_enable")
        enable(**{f"{kind}_checkpointing_kwargs": {"use_reentrant": False}})
    init = _checksum(model)
    fn: Callable[..., Any] = model
    if cfg.compile:
        from ..harness.stack.compile_cache import use_install_cache

        use_install_cache()  # (never replay what another torchao or transformers compiled)
        torch._dynamo.reset()
        fn = torch.compile(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        params,
        lr=filled(cfg.lr, "lr"),
        betas=(0.9, 0.95),
        weight_decay=cfg.weight_decay,
        **({"fused": True} if device.type == "cuda" else {}),
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(cfg))
    losses: list[float | None] = []
    seconds: list[float] = []
    steps = filled(cfg.steps, "steps")
    tokens_per_step = filled(cfg.batch, "batch") * filled(cfg.seq_len, "seq_len")

    def tokens_per_s() -> float | None:
        timed = seconds[cfg.throughput_warmup :]
        return tokens_per_step * len(timed) / sum(timed) if timed else None

    batches = batches.to(device)  # a few MB even for 4b-shaped: no host copies inside the timed loop
    for step in range(steps):
        _sync(device)
        t0 = time.perf_counter()
        ids = batches[step]
        loss = fn(input_ids=ids, labels=ids).loss
        loss.backward()
        if cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()  # synchronizes
        _sync(device)
        seconds.append(time.perf_counter() - t0)
        losses.append(value if math.isfinite(value) else None)
        if progress is not None:
            progress(label, step + 1, steps, value, tokens_per_s())
    return {
        "losses": losses,
        "step_seconds": seconds,
        "tokens_per_s": tokens_per_s(),
        "throughput_steps": len(seconds[cfg.throughput_warmup :]),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "init_checksum": init,
        "checkpointing": bool(
            model.is_activation_checkpointing
            if hasattr(model, "is_activation_checkpointing")
            else getattr(model, "is_gradient_checkpointing", False)
        ),
    }


def nudge_weights(model: torch.nn.Module, which: int) -> int:
    """Move one element of every weight matrix (2-D parameter) by one ulp, in place: the smallest
    change to a run's arithmetic, from which the run-to-run noise floor is measured. ``which``
    (>= 1) chooses the elements; returns how many were moved."""
    if not isinstance(which, int) or isinstance(which, bool) or which < 1:
        raise ValueError(f"which: expected an int >= 1, got {which!r}")
    views = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}
    gen = torch.Generator().manual_seed(which)
    moved = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() != 2:
                continue
            if p.dtype not in views:
                raise ValueError(f"model: {name} is {p.dtype}; one-ulp nudges need bf16, fp16 or fp32 weights")
            i = int(torch.randint(0, p.numel(), (1,), generator=gen))
            # the next representable magnitude: +1 on the bit pattern (weights are finite and small)
            bits = p.detach().reshape(-1)[i : i + 1].view(views[p.dtype])
            p.view(-1)[i : i + 1].copy_((bits + 1).view(p.dtype))
            moved += 1
    return moved


def speed_note(cfg: FinetuneConfig) -> str | None:
    """Why a resolved comparison has no speed figure, or None when FP8's tokens/s against bf16's
    measures FP8 hardware: torchao's Float8Linear through torch._scaled_mm on a GPU. Emulated FP8
    (float32 matmuls of the cast values; fp8ref's reference layers) and a CPU (no FP8 units:
    torch._scaled_mm dequantizes, or runs oneDNN's reference kernel, docs/finetune-cpu.md) time
    the emulation, not FP8."""
    where = "on CPU" if torch.device(cfg.device).type == "cpu" else f"on {cfg.device}"
    if cfg.backend == "fp8ref" or cfg.emulate:
        return f"FP8 emulated {where}: no speed figure"
    if torch.device(cfg.device).type == "cpu":
        return "FP8 on CPU, which has no FP8 units: no speed figure"
    return None


def _prepare(cfg: FinetuneConfig, progress: bool) -> tuple:
    """``(build, source, batches, data description, loss floor)`` for a resolved config; a
    dataset loader shows its progress bars only with ``progress``."""
    if cfg.model is None:
        tokenizer = ByteTokenizer()
        build = functools.partial(preset_model, cfg, tokenizer.vocab_size)
        source = f"preset {cfg.preset} (Qwen3 architecture, random init, {cfg.layers} layers)"
    else:
        tokenizer = pretrained_tokenizer(cfg.model)
        build = functools.partial(pretrained_model, cfg.model)
        fp8 = fp8_checkpoint(cfg.model)
        source = cfg.model if fp8 is None else f"{cfg.model}: {fp8}"
    packed, data_what, floor = batches(cfg, tokenizer, progress)
    return build, source, packed, data_what, floor


def _run(
    cfg: FinetuneConfig,
    build: Callable[[], torch.nn.Module],
    batches: torch.Tensor,
    label: str,
    nudge: int,
    fp8: bool,
    progress: Progress | None,
) -> tuple[dict, dict | None, int]:
    """One training run: ``(run record, FP8 conversion info or None, parameter count)``."""
    device = torch.device(cfg.device)
    if device.type == "cuda":  # the previous run's model gone before this one's peak is measured
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    model = build().to(device)
    n_params = sum(p.numel() for p in model.parameters())
    if nudge:
        nudge_weights(model, nudge)
    info = convert_fp8(model, cfg) if fp8 else None
    run = _train(model, batches, cfg, label, progress)
    run["nudge"] = nudge
    del model
    return run, info, n_params


def compare(cfg: FinetuneConfig, progress: Progress | None = None) -> dict:
    """Train bf16, then FP8, from the same weights on the same batches, then ``noise_runs`` more
    bf16 runs from one-ulp-nudged weights; the results document, with the parity verdict."""
    instance(cfg, FinetuneConfig, "cfg", "a FinetuneConfig")
    cfg = cfg.resolved()
    build, source, batches, data_what, floor = _prepare(cfg, progress is not None)
    runs, fp8_info, n_params = {}, None, None
    plan = [("bf16", 0), ("fp8", 0)] + [(f"bf16~{k}", k) for k in range(1, cfg.noise_runs + 1)]
    for label, nudge in plan:
        runs[label], info, n_params = _run(cfg, build, batches, label, nudge, label == "fp8", progress)
        fp8_info = info or fp8_info
    k, tail_b, tail_f, gap = tail_gap(runs["bf16"]["losses"], runs["fp8"]["losses"])
    for run in runs.values():
        run["tail_loss"] = tail_loss(run["losses"])
    bf16_labels = ["bf16"] + [label for label, _ in plan[2:]]
    budget = filled(cfg.fp8_budget, "fp8_budget")
    verdict = parity(
        [runs[label]["tail_loss"] for label in bf16_labels],
        tail_f,
        budget,
        budget_source=budget_source(cfg.preset, cfg.model, budget),
    )
    verdict["statements"] = {"difference": difference_line(verdict), "budget": budget_line(verdict)}
    tps_b, tps_f = runs["bf16"]["tokens_per_s"], runs["fp8"]["tokens_per_s"]
    no_speed = speed_note(cfg)
    return {
        "schema": RESULTS_SCHEMA,
        "config": dataclasses.asdict(cfg),
        "versions": {
            **versions(cfg.device),
            "transformers": package_version("transformers"),
            "datasets": package_version("datasets"),
            "torch_threads": torch.get_num_threads(),
        },
        "model": {  # (an FP8 run always ran, so its conversion info is there)
            "source": source,
            "parameters": n_params,
            "fp8_backend": cfg.backend,
            "recipe": cfg.recipe,
            "fp8_linears": (fp8_info or {}).get("converted"),
            "kept_high_precision": (fp8_info or {}).get("kept_high_precision"),
        },
        "data": {
            "dataset": data_what,
            "tokens_per_step": filled(cfg.batch, "batch") * filled(cfg.seq_len, "seq_len"),
            "loss_floor": floor,
        },
        "runs": runs,
        "tail_steps": k,
        "tail_gap": gap,
        "parity": verdict,
        # FP8's tokens/s over bf16's, only where that measures FP8 hardware; else why not
        "speedup": tps_f / tps_b if no_speed is None and tps_b and tps_f else None,
        "speed_note": no_speed,
    }


def calibrate(cfg: FinetuneConfig, runs: int, progress: Progress | None = None) -> dict:
    """``runs`` bf16 and ``runs`` FP8 trainings, run k from weights nudged by ``nudge_weights(k)``
    (k = 0 unnudged): each precision's tail losses, their mean and relative spread, and FP8's
    mean gap. This is how a budget for a new model or preset is measured: FP8's mean gap is its
    own cost, the spreads are the run-to-run noise."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 2:
        raise ValueError(f"runs: expected an int >= 2 (a spread needs two runs), got {runs!r}")
    cfg = cfg.resolved()
    build, _, batches, _, _ = _prepare(cfg, progress is not None)
    out: dict = {}
    for label, fp8 in (("bf16", False), ("fp8", True)):
        tails = [
            tail_loss(_run(cfg, build, batches, f"{label}~{k}", k, fp8, progress)[0]["losses"]) for k in range(runs)
        ]
        mean = sum(tails) / runs
        spread = math.sqrt(sum((x - mean) ** 2 for x in tails) / (runs - 1)) / mean
        out[label] = {"tails": tails, "mean": mean, "spread": spread}
    out["fp8_gap"] = out["fp8"]["mean"] / out["bf16"]["mean"] - 1
    return out
