"""What a comparison trains: the model (the embedded preset, or a pretrained one opted into) and
its batches (the embedded grammar corpus, wikitext, or a local file)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..harness.stack import probes
from ..harness.stack.install import require, versions_line
from .config import LOCAL_BUILDERS, FinetuneConfig, ResourceUnavailable, filled
from .corpus import GRAMMAR, ByteTokenizer, grammar_dataset, pack
from .presets import PRESETS

__all__ = ["preset_model", "pretrained_tokenizer", "pretrained_model", "fp8_checkpoint", "batches", "WIKITEXT"]

WIKITEXT = ("Salesforce/wikitext", "wikitext-103-raw-v1")


def _require_transformers() -> None:
    """transformers, or a clear error: missing (``MissingPackage``), or unusable because it imports
    torchao, which is installed but does not import with this torch (``ResourceUnavailable``)."""
    require("transformers", "the fine-tune comparison")
    refusal = probes.torchao_float8_refusal()
    if refusal is not None and refusal.startswith("refused"):
        raise ResourceUnavailable(
            f"transformers imports torchao, which is installed but does not import with "
            f"{versions_line()}: {refusal}; install a torchao that matches this torch, or uninstall it"
        )


def preset_model(cfg: FinetuneConfig, vocab_size: int) -> torch.nn.Module:
    """The preset's Qwen3ForCausalLM in bf16, random init under ``cfg.seed``."""
    _require_transformers()
    from transformers import Qwen3Config, Qwen3ForCausalLM

    p = PRESETS[cfg.preset]
    # transformers' type stubs omit keywords Qwen3Config takes (rope_theta, attn_implementation)
    config = Qwen3Config(  # type: ignore[call-arg]
        vocab_size=vocab_size,
        hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size,
        num_hidden_layers=filled(cfg.layers, "layers"),
        num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads,
        head_dim=p.head_dim,
        max_position_embeddings=max(4096, filled(cfg.seq_len, "seq_len")),
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_cache=False,
        attn_implementation=p.attention,
    )
    torch.manual_seed(cfg.seed)
    # (transformers' stubs type .to() as a wrapper taking the model; it takes a dtype like nn.Module's)
    return Qwen3ForCausalLM(config).to(torch.bfloat16)  # type: ignore[arg-type]


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "~")) or os.path.isabs(name)


def _from_pretrained(name: str, load: Callable[[str], Any]) -> Any:
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


def pretrained_tokenizer(name: str) -> Any:
    _require_transformers()
    from transformers import AutoTokenizer

    tok = _from_pretrained(name, AutoTokenizer.from_pretrained)
    if tok.eos_token_id is None:
        raise ResourceUnavailable(f"--model {name!r}: its tokenizer has no eos_token_id to separate documents")
    return tok


def pretrained_model(name: str) -> torch.nn.Module:
    """``AutoModelForCausalLM`` from a hub id or a local directory, in bf16; an FP8 block checkpoint
    (a fine-grained FP8 ``quantization_config``) dequantized by transformers on loading
    (``FineGrainedFP8Config(dequantize=True)``: the loader ``fp8_checkpoint`` checks)."""
    _require_transformers()
    from transformers import AutoModelForCausalLM

    from ..harness.hf import block_checkpoint

    def load(path: str) -> Any:
        if block_checkpoint.fp8_config(path) is not None:
            return block_checkpoint.load(path, torch.bfloat16)
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)

    return _from_pretrained(name, load)


def fp8_checkpoint(name: str) -> str | None:
    """For ``--model`` naming a local FP8 block checkpoint: one line for the report saying what it
    holds and whether transformers' loader dequantizes each FP8 weight as fp8ref's block reference
    does (``harness.hf.block_checkpoint.check_loader_on``: ``definition``, or the named deviations
    and the weights they touch, or what differs); None for any other model."""
    from ..harness.hf import block_checkpoint, block_checks

    path = os.path.expanduser(name)
    q = block_checkpoint.fp8_config(path) if os.path.isdir(path) else None
    if q is None:
        return None
    quantized = block_checkpoint.read(path)
    check = block_checkpoint.check_loader_on(quantized, torch.bfloat16)
    fmt = {str(w.scale_fmt) for w in quantized.values()} or {str(q.get("scale_fmt", "float"))}
    block = "x".join(str(b) for b in q["weight_block_size"])
    line = (
        f"an FP8 block checkpoint ({len(quantized)} FP8 weights, {block} blocks, {'/'.join(sorted(fmt))} scales), "
        f"dequantized to bfloat16 by transformers: {block_checks.profile_value(check)}"
    )
    deviating = {n: w for n, w in sorted(check.observed.items()) if w != "definition"}
    if deviating:
        line += f" ({', '.join(f'{n}: {w}' for n, w in deviating.items())})"
    return line + (f"; {'; '.join(check.problems[:3])}" if check.problems else "")


def _root_cause(exc: BaseException) -> BaseException:
    """The error a loader's wrapper was raised from (datasets wraps a parser's error in a
    ``DatasetGenerationError`` that says only that generation failed)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


@contextlib.contextmanager
def _quiet_datasets(datasets: Any, progress: bool) -> Iterator[None]:
    """datasets' own progress bars only where the comparison shows progress, and its logged
    errors not at all: a file it cannot read is reported once, by the error raised here."""
    log = logging.getLogger("datasets")
    level, bars = log.level, not datasets.are_progress_bars_disabled()
    log.setLevel(logging.CRITICAL)
    if not progress:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        log.setLevel(level)
        if bars and not progress:
            datasets.enable_progress_bars()


def _local_file(path: str) -> str:
    """The local dataset file, or ResourceUnavailable naming it and what is wrong with it."""
    if os.path.getsize(path) == 0:
        raise ResourceUnavailable(f"--dataset {path!r}: the file is empty (0 bytes)")
    return path


def _texts(cfg: FinetuneConfig, n_tokens: int, progress: bool) -> tuple[Any, str, float | None]:
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
        loader = functools.partial(datasets.load_dataset, builder, data_files=_local_file(cfg.dataset), split="train")
    try:
        with _quiet_datasets(datasets, progress):
            ds = loader()
    except Exception as exc:  # noqa: BLE001 - every loader failure gets one clear message
        if cfg.dataset != "wikitext":  # a local file: what is wrong with it, no word of a hub
            raise ResourceUnavailable(
                f"--dataset {cfg.dataset!r}: not a readable {Path(cfg.dataset).suffix[1:]} file for datasets' "
                f"{builder!r} builder ({_first_line(_root_cause(exc))})"
            ) from exc
        raise ResourceUnavailable(
            f"--dataset {cfg.dataset!r} could not be loaded ({_first_line(exc)}). This machine may not reach the "
            "dataset hub (or HF_DATASETS_OFFLINE is set and it is not cached); pass a local file, or leave "
            "--dataset out to use the embedded grammar corpus."
        ) from exc
    if "text" not in ds.column_names:
        raise ResourceUnavailable(f"--dataset {cfg.dataset!r}: no 'text' column (columns: {ds.column_names})")
    if not any(t and t.strip() for t in ds["text"]):
        raise ResourceUnavailable(
            f"--dataset {cfg.dataset!r}: no text (its {len(ds):,} rows of 'text' are all empty or blank)"
        )
    return (t for t in ds["text"] if t and t.strip()), what, None


def batches(cfg: FinetuneConfig, tokenizer: Any, progress: bool = True) -> tuple[torch.Tensor, str, float | None]:
    """``(steps x batch x seq_len token ids, the data's description, its loss floor or None)``;
    ``progress`` False keeps a dataset loader's progress bars off."""
    steps, batch, seq_len = filled(cfg.steps, "steps"), filled(cfg.batch, "batch"), filled(cfg.seq_len, "seq_len")
    need = steps * batch * seq_len
    texts, what, floor = _texts(cfg, need, progress)
    if isinstance(tokenizer, ByteTokenizer):
        encode = tokenizer.encode
    else:

        def encode(text: str) -> list[int]:
            return tokenizer(text, add_special_tokens=False)["input_ids"]

    try:
        packed = pack(texts, encode, tokenizer.eos_token_id, steps, batch, seq_len)
    except ValueError as exc:  # too little text for the run asked for: the user's file, not a bug
        if cfg.dataset == "grammar" or not str(exc).startswith("texts: "):
            raise  # (a tokenizer's or fp8ref's own error is no fault of the user's file)
        raise ResourceUnavailable(
            f"--dataset {cfg.dataset!r}: {str(exc).removeprefix('texts: ')}; pass more text or fewer "
            "--steps, --batch or --seq-len"
        ) from exc
    return packed, what, floor
