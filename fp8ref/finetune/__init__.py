"""bf16 vs FP8 training of one causal LM (``python -m fp8ref finetune``): the application layer.

Only this subpackage imports transformers, datasets or matplotlib (inside functions). Its parts:
``presets`` (model shapes, parity budgets), ``config`` (one comparison's settings), ``corpus``
(the embedded grammar corpus), ``sources`` (the model and its batches), ``train`` (the runs),
``parity_rule`` (the verdict), ``report`` (JSON, summary lines, plot) and ``faults`` (benign
changes and real faults of torchao's FP8 path, to show what the verdict catches).

Names are loaded on first use, so ``fp8ref.finetune.presets`` is cheap to import.
"""

from __future__ import annotations

from .. import lazy_names

_HOMES = {
    "Preset": "presets",
    "PRESETS": "presets",
    "FP8_BUDGET": "presets",
    "PARITY_Z": "presets",
    "FinetuneConfig": "config",
    "ResourceUnavailable": "config",
    "RESULTS_SCHEMA": "train",
    "compare": "train",
    "calibrate": "train",
    "nudge_weights": "train",
    "parity": "parity_rule",
    "tail_gap": "parity_rule",
    "preset_model": "sources",
    "save_results": "report",
    "summary_lines": "report",
    "parity_line": "report",
    "plot_losses": "report",
}

__all__ = sorted(_HOMES)  # (the one table of public names)


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
