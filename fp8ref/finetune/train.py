"""bf16 vs FP8 training of one causal LM: the same initial weights, data order, optimizer and
schedule twice, once in bf16 and once with FP8 linears, reporting the throughput ratio and the
tail loss gap (the comparison fp8_parity.py's ``--full`` mode ran, made testable).

Defaults need no download: a Qwen3-architecture model built from a config (random init, presets
below) trained on ``fp8ref.finetune.corpus``'s grammar at byte level, whose entropy gives a known loss
floor. ``model=`` / ``dataset=`` opt into a pretrained model (``AutoModelForCausalLM``) and real
data (``datasets.load_dataset``); when they cannot be loaded, ``ResourceUnavailable`` says so.

FP8 comes from torchao's ``convert_to_float8_training`` (recipes tensorwise, rowwise,
rowwise_with_gw_hp) or from ``fp8ref.emulate.convert`` (the emulated reference, any fp8ref
recipe), both behind fp8_parity.py's module filter (skip ``lm_head`` and Linears whose dims are not
multiples of 16). Heavy imports (transformers, datasets, torchao, matplotlib) stay inside functions.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..emulate import default_module_filter
from ..install import TORCHAO_RECIPES, package_version, require, versions
from ..recipes import RECIPES
from ..torchao_compat import require_torchao
from ..validate import instance, one_of
from .corpus import GRAMMAR, ByteTokenizer, grammar_dataset, pack
from .presets import FP8_BUDGET, PARITY_Z, PRESETS

__all__ = ["FinetuneConfig", "ResourceUnavailable", "compare", "calibrate", "tail_gap", "parity", "nudge_weights",
           "preset_model", "RESULTS_SCHEMA"]

RESULTS_SCHEMA = "fp8ref.finetune/2"  # 2: noise runs and the parity verdict
BACKENDS = ("torchao", "fp8ref")
WIKITEXT = ("Salesforce/wikitext", "wikitext-103-raw-v1")
# local dataset files by suffix -> the datasets builder that reads them
LOCAL_BUILDERS = {".txt": "text", ".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


class ResourceUnavailable(RuntimeError):
    """An opt-in model or dataset could not be loaded (no network, no such path, ...)."""


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
            out.fp8_budget = FP8_BUDGET.get(self.preset, 0.01) if self.model is None else 0.01
        for name in ("steps", "seq_len", "batch", "layers", "seed", "noise_runs"):
            v = getattr(out, name)
            low = 0 if name in ("seed", "noise_runs") else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"{name}: expected an int >= {low}, got {v!r}")
        if out.seq_len < 2:
            raise ValueError(f"seq_len: expected at least 2 (a next-token loss needs two), got {out.seq_len}")
        for name in ("lr", "weight_decay", "max_grad_norm", "fp8_budget"):
            v = getattr(out, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0 \
                    or (name == "lr" and v == 0):
                raise ValueError(f"{name}: expected a finite number >= 0 (lr > 0), got {v!r}")
        if out.warmup_steps is None:
            out.warmup_steps = max(1, out.steps // 10)
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
        return min(10, max(1, self.steps // 5))


# --- model and data -------------------------------------------------------------------------------

def preset_model(cfg: FinetuneConfig, vocab_size: int) -> torch.nn.Module:
    """The preset's Qwen3ForCausalLM in bf16, random init under ``cfg.seed``."""
    require("transformers", "the fine-tune comparison")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    p = PRESETS[cfg.preset]
    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=p.hidden_size, intermediate_size=p.intermediate_size,
        num_hidden_layers=cfg.layers, num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads, head_dim=p.head_dim,
        max_position_embeddings=max(4096, cfg.seq_len), rope_theta=1_000_000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, use_cache=False, attn_implementation=p.attention,
    )
    torch.manual_seed(cfg.seed)
    return Qwen3ForCausalLM(config).to(torch.bfloat16)


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "~")) or os.path.isabs(name)


def _from_pretrained(name: str, load):
    """``load(name)`` for a hub id or a local directory, any failure turned into ResourceUnavailable."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"model: expected a hub id or a directory, got {name!r}")
    path = os.path.expanduser(name)
    if _looks_like_path(name) and not os.path.isdir(path):
        raise ResourceUnavailable(f"--model {name!r}: no such directory")
    try:
        return load(path)
    except Exception as exc:  # noqa: BLE001 - every loader failure gets the same clear message
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ResourceUnavailable(
            f"--model {name!r} could not be loaded ({type(exc).__name__}: {first}). If it is a hub id, this "
            "machine may not reach the model hub (or HF_HUB_OFFLINE is set and it is not cached); pass a "
            "local directory, or leave --model out to train the embedded preset."
        ) from exc


def pretrained_tokenizer(name: str):
    require("transformers", "the fine-tune comparison")
    from transformers import AutoTokenizer

    tok = _from_pretrained(name, AutoTokenizer.from_pretrained)
    if tok.eos_token_id is None:
        raise ResourceUnavailable(f"--model {name!r}: its tokenizer has no eos_token_id to separate documents")
    return tok


def pretrained_model(name: str) -> torch.nn.Module:
    """``AutoModelForCausalLM`` from a hub id or a local directory, in bf16."""
    require("transformers", "the fine-tune comparison")
    from transformers import AutoModelForCausalLM

    return _from_pretrained(name, lambda path: AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16))


def _texts(cfg: FinetuneConfig, n_tokens: int):
    """``(texts, description, loss_floor)`` for the configured dataset."""
    if cfg.dataset == "grammar":
        # Byte-level: exactly n_tokens; a subword tokenizer needs more text for as many tokens.
        ds = grammar_dataset(n_tokens if cfg.model is None else 8 * n_tokens, seed=cfg.seed)
        floor = GRAMMAR.loss_floor() if cfg.model is None else None
        return ds["text"], f"embedded grammar corpus (fp8ref.finetune.corpus, seed {cfg.seed})", floor
    datasets = require("datasets", "the fine-tune comparison")
    if cfg.dataset == "wikitext":
        what = f"{WIKITEXT[0]} {WIKITEXT[1]} train"
        loader = functools.partial(datasets.load_dataset, *WIKITEXT, split="train")
    else:  # a local file, checked by FinetuneConfig.resolved
        builder = LOCAL_BUILDERS[Path(cfg.dataset).suffix]
        what = f"{cfg.dataset} ({builder})"
        loader = functools.partial(datasets.load_dataset, builder, data_files=cfg.dataset, split="train")
    try:
        ds = loader()
    except Exception as exc:  # noqa: BLE001 - every loader failure gets the same clear message
        raise ResourceUnavailable(
            f"--dataset {cfg.dataset!r} could not be loaded ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}). This machine may not reach the dataset hub "
            "(or HF_DATASETS_OFFLINE is set and it is not cached); pass a local file, or leave --dataset "
            "out to use the embedded grammar corpus."
        ) from exc
    if "text" not in ds.column_names:
        raise ValueError(f"dataset: {what} has no 'text' column (columns: {ds.column_names})")
    return (t for t in ds["text"] if t and t.strip()), what, None


def _batches(cfg: FinetuneConfig, tokenizer) -> tuple[torch.Tensor, str, float | None]:
    need = cfg.steps * cfg.batch * cfg.seq_len
    texts, what, floor = _texts(cfg, need)
    if isinstance(tokenizer, ByteTokenizer):
        encode = tokenizer.encode
    else:
        def encode(text: str) -> list[int]:
            return tokenizer(text, add_special_tokens=False)["input_ids"]
    return pack(texts, encode, tokenizer.eos_token_id, cfg.steps, cfg.batch, cfg.seq_len), what, floor


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
        from ..emulate import convert

        convert(model, cfg.recipe, module_filter_fn=default_module_filter)
    kept = set(_linears(model))
    if not before - kept:
        raise ValueError(f"model: no Linear passed the module filter, so the FP8 run would be bf16 ({sorted(before)})")
    return {"converted": len(before - kept), "kept_high_precision": sorted(kept)}


# --- training -------------------------------------------------------------------------------------

Progress = Callable[[str, int, int, float, "float | None"], None]


def _schedule(cfg: FinetuneConfig) -> Callable[[int], float]:
    """Linear warm-up, then cosine decay to 10% of the peak learning rate."""
    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        t = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))
    return factor


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _checksum(model: torch.nn.Module) -> float:
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters()))


def _train(model: torch.nn.Module, batches: torch.Tensor, cfg: FinetuneConfig, label: str,
           progress: Progress | None) -> dict:
    device = torch.device(cfg.device)
    model.train()
    if cfg.grad_checkpointing:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ValueError(f"grad_checkpointing: {type(model).__name__} does not support it")
        # transformers 5.x renamed it activation_checkpointing_enable; the old name warns
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    init = _checksum(model)
    fn = model
    if cfg.compile:
        torch._dynamo.reset()
        fn = torch.compile(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay,
                            **({"fused": True} if device.type == "cuda" else {}))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(cfg))
    losses, seconds = [], []
    tokens_per_step = cfg.batch * cfg.seq_len

    def tokens_per_s() -> float | None:
        timed = seconds[cfg.throughput_warmup:]
        return tokens_per_step * len(timed) / sum(timed) if timed else None

    batches = batches.to(device)  # a few MB even for 4b-shaped: no host copies inside the timed loop
    for step in range(cfg.steps):
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
            progress(label, step + 1, cfg.steps, value, tokens_per_s())
    return {
        "losses": losses,
        "step_seconds": seconds,
        "tokens_per_s": tokens_per_s(),
        "throughput_steps": len(seconds[cfg.throughput_warmup:]),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "init_checksum": init,
        "checkpointing": bool(model.is_activation_checkpointing if hasattr(model, "is_activation_checkpointing")
                              else getattr(model, "is_gradient_checkpointing", False)),
    }


def tail_gap(baseline: list, fp8: list, fraction: float = 0.1) -> tuple[int, float, float, float]:
    """``(k, tail_baseline, tail_fp8, gap)``: the mean loss of each run's last ``k`` steps
    (``fraction`` of them, at least one; fp8_parity.py's measure) and ``(fp8 - baseline) / baseline``."""
    if len(baseline) != len(fp8) or not baseline:
        raise ValueError(
            f"baseline, fp8: expected two non-empty loss lists of one length, got {len(baseline)} and {len(fp8)}"
        )
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction: expected 0 < fraction <= 1, got {fraction}")
    k = max(1, int(len(baseline) * fraction))
    tails = []
    for losses in (baseline, fp8):
        tail = losses[-k:]
        if any(x is None or not math.isfinite(x) for x in tail):
            return k, math.nan, math.nan, math.nan  # a diverged run has no gap to report
        tails.append(sum(tail) / k)
    return k, tails[0], tails[1], (tails[1] - tails[0]) / tails[0]


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


def parity(bf16_tails: list[float], fp8_tail: float, budget: float, z: float = PARITY_Z) -> dict:
    """FP8's tail loss against the bf16 runs, with the run-to-run noise measured from them.

    ``noise`` is the relative sample standard deviation of the bf16 tail losses (runs that differ
    only by one-ulp nudges of the initial weights), scaled by sqrt(1 + 1/n) because the gap also
    carries the error of the n-run bf16 mean. The gap is within bounds when
    ``|fp8 / mean(bf16) - 1| <= budget + z * noise``: FP8 may cost ``budget``, and what the runs'
    divergence can explain at ``z`` standard deviations is not counted against it. With one bf16
    run there is no noise estimate and the bound is the budget alone."""
    values = [x for x in bf16_tails if x is not None and math.isfinite(x)]
    if len(values) != len(bf16_tails) or not values or fp8_tail is None or not math.isfinite(fp8_tail):
        return {"baseline": None, "gap": math.nan, "noise": None, "z_score": None, "budget": budget,
                "bound": None, "within": False, "bf16_runs": len(bf16_tails)}
    n = len(values)
    mean = sum(values) / n
    noise = None
    if n > 1:
        spread = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1)) / mean
        noise = spread * math.sqrt(1 + 1 / n)
    gap = fp8_tail / mean - 1
    bound = budget + (z * noise if noise is not None else 0.0)
    return {"baseline": mean, "gap": gap, "noise": noise, "z_score": gap / noise if noise else None,
            "budget": budget, "bound": bound, "within": abs(gap) <= bound, "bf16_runs": n}


def _prepare(cfg: FinetuneConfig) -> tuple:
    """``(build, source, batches, data description, loss floor)`` for a resolved config."""
    if cfg.model is None:
        tokenizer = ByteTokenizer()
        build = functools.partial(preset_model, cfg, tokenizer.vocab_size)
        source = f"preset {cfg.preset} (Qwen3 architecture, random init, {cfg.layers} layers)"
    else:
        tokenizer = pretrained_tokenizer(cfg.model)
        build = functools.partial(pretrained_model, cfg.model)
        source = cfg.model
    batches, data_what, floor = _batches(cfg, tokenizer)
    return build, source, batches, data_what, floor


def _run(cfg: FinetuneConfig, build, batches: torch.Tensor, label: str, nudge: int, fp8: bool,
         progress: Progress | None) -> tuple[dict, dict | None, int]:
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


def _tail(losses: list) -> float:
    """The mean loss of the last tenth of the steps (NaN when the run diverged there)."""
    return tail_gap(losses, losses)[1]


def compare(cfg: FinetuneConfig, progress: Progress | None = None) -> dict:
    """Train bf16, then FP8, from the same weights on the same batches, then ``noise_runs`` more
    bf16 runs from one-ulp-nudged weights; the results document, with the parity verdict."""
    instance(cfg, FinetuneConfig, "cfg", "a FinetuneConfig")
    cfg = cfg.resolved()
    build, source, batches, data_what, floor = _prepare(cfg)
    runs, fp8_info, n_params = {}, None, None
    plan = [("bf16", 0), ("fp8", 0)] + [(f"bf16~{k}", k) for k in range(1, cfg.noise_runs + 1)]
    for label, nudge in plan:
        runs[label], info, n_params = _run(cfg, build, batches, label, nudge, label == "fp8", progress)
        fp8_info = info or fp8_info
    k, tail_b, tail_f, gap = tail_gap(runs["bf16"]["losses"], runs["fp8"]["losses"])
    for run in runs.values():
        run["tail_loss"] = _tail(run["losses"])
    bf16_labels = ["bf16"] + [label for label, _ in plan[2:]]
    verdict = parity([runs[label]["tail_loss"] for label in bf16_labels], tail_f, cfg.fp8_budget)
    tps_b, tps_f = runs["bf16"]["tokens_per_s"], runs["fp8"]["tokens_per_s"]
    return {
        "schema": RESULTS_SCHEMA,
        "config": dataclasses.asdict(cfg),
        "versions": {**versions(cfg.device), "transformers": package_version("transformers"),
                     "datasets": package_version("datasets"), "torch_threads": torch.get_num_threads()},
        "model": {"source": source, "parameters": n_params, "fp8_backend": cfg.backend, "recipe": cfg.recipe,
                  "fp8_linears": fp8_info["converted"], "kept_high_precision": fp8_info["kept_high_precision"]},
        "data": {"dataset": data_what, "tokens_per_step": cfg.batch * cfg.seq_len, "loss_floor": floor},
        "runs": runs,
        "tail_steps": k,
        "tail_gap": gap,
        "parity": verdict,
        "speedup": tps_f / tps_b if tps_b and tps_f else None,
    }


def calibrate(cfg: FinetuneConfig, runs: int, progress: Progress | None = None) -> dict:
    """``runs`` bf16 and ``runs`` FP8 trainings, run k from weights nudged by ``nudge_weights(k)``
    (k = 0 unnudged): each precision's tail losses, their mean and relative spread, and FP8's
    mean gap. This is how a budget for a new model or preset is measured: FP8's mean gap is its
    own cost, the spreads are the run-to-run noise."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 2:
        raise ValueError(f"runs: expected an int >= 2 (a spread needs two runs), got {runs!r}")
    cfg = cfg.resolved()
    build, _, batches, _, _ = _prepare(cfg)
    out: dict = {}
    for label, fp8 in (("bf16", False), ("fp8", True)):
        tails = [_tail(_run(cfg, build, batches, f"{label}~{k}", k, fp8, progress)[0]["losses"])
                 for k in range(runs)]
        mean = sum(tails) / runs
        spread = math.sqrt(sum((x - mean) ** 2 for x in tails) / (runs - 1)) / mean
        out[label] = {"tails": tails, "mean": mean, "spread": spread}
    out["fp8_gap"] = out["fp8"]["mean"] / out["bf16"]["mean"] - 1
    return out
