"""What each of this family's profile keys means, and what a change of it does to a training run:
torchao's float8, MX and NVFP4 (its optimizer state and autocast keys are the state family's). The
keys are measured in ``profile_keys.py``; the rows' form, the severities and how a row is found for
a key: ``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("torchao",)

_M = KeyMeaning
# the first row that matches a key wins: the specific rows come before the general ones
MEANINGS: tuple[KeyMeaning, ...] = (
    # --- torchao's FP8 surface --------------------------------------------------------------------------
    _M(
        "torchao.surface",
        "torchao's FP8 surface",
        "whether torchao's FP8 surface could be read whole (present only when it could not: a module of it "
        "needs a package fp8ref itself needs, which is not installed)",
        "its configs and enums in that module are not discovered here: their keys are not compared",
        "refusal",
    ),
    _M(
        "torchao.surface.module.**",
        "torchao's FP8 surface",
        "whether torchao's module {1}, one of those its FP8 surface is read from, imports",
        "its configs and enums are not discovered, so none of them is pinned or accounted for",
        "refusal",
    ),
    _M(
        "torchao.surface.*.*",
        "torchao's FP8 surface",
        "the default of {2} in torchao's {1} (fp8ref/harness/ao/coverage.py names the check of each field)",
        "a layer converted without setting it trains another way (a changed default), or the field was added "
        "or removed (a new option: no check covers it until the coverage table names one)",
        "numerics",
    ),
    _M(
        "torchao.surface.*",
        "torchao's FP8 surface",
        "the members of torchao's enum {1}: its recipes, scaling types, scale modes or kernel choices",
        "a recipe, scale mode or kernel choice added (no check covers it until the coverage table names one) "
        "or removed (code that names it stops with an error)",
        "refusal",
    ),
    # --- torchao ---------------------------------------------------------------------------------------
    _M(
        "torchao.recipe.*.*.fast_accum",
        "torchao recipes",
        "whether torchao's {1} recipe asks for fast accumulation in its {2} GEMM",
        "fast accumulation keeps fewer bits of each dot product (see scaled_mm.accum_bits): {2} moves",
        "numerics",
    ),
    _M(
        "torchao.recipe.*.*.*",
        "torchao recipes",
        "the dtype, scaling granularity and scale rounding of operand {3} of the {2} GEMM in torchao's {1} recipe",
        "the recipe casts that operand differently: every step's {2} numbers change",
        "numerics",
    ),
    _M(
        "torchao.digest.cast.*",
        "torchao casts",
        "a bit-exact digest of torchao's {1} cast (scales and codes) of a fixed input",
        "torchao's scales or codes for the same input changed: every FP8 tensor it makes may differ",
        "numerics",
    ),
    _M(
        "torchao.digest.float8linear.*",
        "torchao casts",
        "a bit-exact digest of torchao's Float8Linear ({1}) forward and backward on inputs whose GEMMs are "
        "exact in any order",
        "a training step through torchao's float8 layers gives other outputs or gradients",
        "numerics",
    ),
    _M(
        "torchao.digest.mx.*.*",
        "torchao MX",
        "a bit-exact digest of torchao's MX cast to {1} elements in the {2} scale mode",
        "MX-quantized weights and activations change",
        "numerics",
    ),
    _M(
        "torchao.digest.nvfp4.*",
        "torchao NVFP4",
        "a bit-exact digest of torchao's NVFP4 cast ({1}-level scales)",
        "NVFP4-quantized weights and activations change",
        "numerics",
    ),
    _M(
        "torchao.mx.default_mode.*",
        "torchao MX",
        "the MX scale mode torchao's {1} uses when not told",
        "MX block scales computed the default way round differently (FLOOR can saturate a block's largest "
        "element, RCEIL never does)",
        "numerics",
    ),
    _M(
        "torchao.mx.*.special_block_scale",
        "torchao MX",
        "the E8M0 scale torchao's {1} mode gives a block holding inf, -inf or NaN (the OCP MX spec is silent)",
        "one non-finite value sets the scale of its whole 32-value block: the block's other values change",
        "numerics",
    ),
    _M(
        "torchao.mx.*.deviation.*",
        "torchao MX",
        "a named deviation of torchao's {1} scale from the definition (fp8ref/harness/casts/deviations.py)",
        "the blocks the deviation names get another scale; a change means torchao fixed or changed it",
        "numerics",
    ),
    _M(
        "torchao.mx.partial_block",
        "torchao MX",
        "what torchao does with a row that ends inside an MX block",
        "shapes whose last dimension is not a multiple of the block run or are refused",
        "refusal",
    ),
    _M(
        "torchao.narrow.*.*.in_range_mismatches",
        "narrow formats",
        "values of {2} inside {1}'s range that torchao's cast rounds unlike round-to-nearest-even",
        "MX FP4/FP6 elements land one code away from the definition",
        "numerics",
    ),
    _M(
        "torchao.narrow.*.*.inf",
        "narrow formats",
        "what torchao's {1} cast (no inf, no NaN) makes of {2} +-inf",
        "an inf inside an FP4/FP6 block becomes max or something else",
        "numerics",
    ),
    _M(
        "torchao.narrow.*.*.nan_codes",
        "narrow formats",
        "the {1} codes torchao gives a {2} NaN ({1} has no NaN)",
        "a NaN turns into a finite value: its block's numbers are wrong either way, now wrong differently",
        "numerics",
    ),
    _M(
        "torchao.nvfp4.single.division",
        "torchao NVFP4",
        "whether torchao's single-level NVFP4 divides by the block scale or multiplies by its reciprocal",
        "elements at FP4 rounding ties land on the other code",
        "numerics",
    ),
    _M(
        "torchao.special.*.*",
        "torchao special values",
        "the scale and codes torchao's {2} cast gives an activation holding a {1}",
        "one {1} in a tensor sets the scale of its tensor or row: what the rest becomes changes",
        "numerics",
    ),
    _M(
        "torchao",
        "torchao",
        "whether torchao's float8 training imports with this torch",
        "without it every torchao path is refused (and its keys are absent)",
        "refusal",
    ),
)
