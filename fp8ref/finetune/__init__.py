"""bf16 vs FP8 training of one causal LM (``python -m fp8ref finetune``): the application layer.

Only this subpackage imports transformers, datasets or matplotlib (inside functions). Its parts:
``presets`` (model shapes, parity budgets), ``corpus`` (the embedded grammar corpus), ``train``
(the runs and the parity verdict), ``report`` (JSON, summary lines, plot) and ``faults`` (benign
changes and real faults of torchao's FP8 path, to show what the verdict catches).

Names are loaded on first use, so ``fp8ref.finetune.presets`` is cheap to import.
"""

from __future__ import annotations

from .. import lazy_names

_HOMES = {
    "Preset": "presets", "PRESETS": "presets", "FP8_BUDGET": "presets", "PARITY_Z": "presets",
    "FinetuneConfig": "train", "ResourceUnavailable": "train", "RESULTS_SCHEMA": "train", "compare": "train",
    "calibrate": "train", "parity": "train", "tail_gap": "train", "nudge_weights": "train",
    "preset_model": "train",
    "save_results": "report", "summary_lines": "report", "parity_line": "report", "plot_losses": "report",
}

__all__ = sorted(_HOMES)


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
