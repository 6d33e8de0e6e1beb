"""A team's FP8 module held to its high-precision twin through a training lifecycle, within
bounds derived from the recipe it declares, a failure naming the submodule, the tensor and the
team's lines that ran its FP8 ops (docs/twin.md).

- ``check``: ``ModuleCheck`` (the team's FP8 module, its twin, its ``Recipe``), ``check_module``
  (its results, ``fp8ref.harness.claims.ClaimResult``s: a ``--fp8-claims`` target returns them
  beside its claims' and they join the team's golden alike);
- ``bounds``: ``Operand``, ``Scaling`` and the bounds derived from them;
- ``examples``: the shipped seed-style modules and torchao's Float8Linear as module checks.
"""

from __future__ import annotations

from .bounds import Operand, Scaling
from .check import EVENTS, ModuleCheck, Recipe, check_module

__all__ = ["ModuleCheck", "Recipe", "Operand", "Scaling", "check_module", "EVENTS"]
