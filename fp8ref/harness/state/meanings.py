"""What each of this family's profile keys means, and what a change of it does to a training run: the
ways training keeps FP8 state (checkpoints, copies), torchao's FP8 optimizer state and Float8Linear
under autocast. The keys are measured in ``profile_keys.py``; the rows' form, the severities and
how a row is found for a key: ``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("checkpoint", "torchao.optim", "torchao.autocast")

_M = KeyMeaning
# the first row that matches a key wins: the specific rows come before the general ones
MEANINGS: tuple[KeyMeaning, ...] = (
    # --- checkpoints -----------------------------------------------------------------------------------
    _M(
        "checkpoint.torchao.*.**",
        "checkpoints",
        "whether torchao's {1} tensor comes back whole (every field, inner tensors bitwise) through {2}",
        "a field lost in a checkpoint (a scale, a block layout) resumes training from other numbers with no "
        "error; a refusal stops the save or the load",
        "numerics",
    ),
    _M(
        "checkpoint.torchao",
        "checkpoints",
        "whether torchao's quantized tensors could be built to check their checkpoints",
        "without them no torchao checkpoint path is checked",
        "refusal",
    ),
    _M(
        "checkpoint.*.**",
        "checkpoints",
        "whether a tensor holding every {1} code comes back bitwise, with its dtype, through {2}",
        "FP8 weights or optimizer state saved this way come back changed (or the save or load is refused)",
        "numerics",
    ),
    _M(
        "torchao.optim.fp8_state",
        "torchao optimizer",
        "torchao's FP8 optimizer state (AdamWFp8): its block size, scale dtype, and whether its codes and "
        "scales are the reference's",
        "Adam moments stored another way: every step's update changes",
        "numerics",
    ),
    _M(
        "torchao.autocast.*.*.*",
        "torchao autocast",
        "which dtype torchao's Float8Linear ({3}) quantizes its input from, and returns, under {1} autocast to {2}",
        "an input rounded to {2} before the FP8 cast, or an output in another dtype, changes the numbers of "
        "mixed-precision training",
        "numerics",
    ),
)
