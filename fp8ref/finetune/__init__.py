"""bf16 vs FP8 training of one causal LM (``python -m fp8ref finetune``): the application layer.

Only this subpackage imports transformers, datasets or matplotlib (inside functions). Its parts:
``presets`` (model shapes, parity budgets), ``config`` (one comparison's settings), ``corpus``
(the embedded grammar corpus), ``sources`` (the model and its batches), ``train`` (the runs),
``parity_rule`` (the verdict), ``intervals`` (how sure it can be with n runs), ``report`` (JSON,
summary lines, plot) and ``faults`` (benign changes and real faults of torchao's FP8 path, to show
what the verdict catches).

Names are loaded on first use, so ``fp8ref.finetune.presets`` is cheap to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import lazy_names

_HOMES = {
    "Preset": "presets",
    "PRESETS": "presets",
    "FP8_BUDGET": "presets",
    "PARITY_Z": "presets",
    "CONFIDENCE": "presets",
    "budget_source": "presets",
    "FinetuneConfig": "config",
    "ResourceUnavailable": "config",
    "RESULTS_SCHEMA": "train",
    "compare": "train",
    "calibrate": "train",
    "nudge_weights": "train",
    "speed_note": "train",
    "parity": "parity_rule",
    "tail_gap": "parity_rule",
    "preset_model": "sources",
    "save_results": "report",
    "summary_lines": "report",
    "parity_line": "report",
    "difference_line": "report",
    "budget_line": "report",
    "loss_figure": "report",
    "plot_losses": "report",
}

if TYPE_CHECKING:  # the names as the type checker sees them at run time they load lazily
    from .config import FinetuneConfig as FinetuneConfig
    from .config import ResourceUnavailable as ResourceUnavailable
    from .parity_rule import parity as parity
    from .parity_rule import tail_gap as tail_gap
    from .presets import CONFIDENCE as CONFIDENCE
    from .presets import FP8_BUDGET as FP8_BUDGET
    from .presets import PARITY_Z as PARITY_Z
    from .presets import PRESETS as PRESETS
    from .presets import Preset as Preset
    from .presets import budget_source as budget_source
    from .report import budget_line as budget_line
    from .report import difference_line as difference_line
    from .report import loss_figure as loss_figure
    from .report import parity_line as parity_line
    from .report import plot_losses as plot_losses
    from .report import save_results as save_results
    from .report import summary_lines as summary_lines
    from .sources import preset_model as preset_model
    from .train import RESULTS_SCHEMA as RESULTS_SCHEMA
    from .train import calibrate as calibrate
    from .train import compare as compare
    from .train import nudge_weights as nudge_weights
    from .train import speed_note as speed_note

__all__ = sorted(_HOMES)  # (the one table of public names)


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
