"""What each of this family's profile keys means, and what a change of it does to a training run:
torch._scaled_mm and F.scaled_mm, mixture-of-experts grouped GEMMs and the emulated MLP. The keys
are measured in ``profile_keys.py``; the rows' form, the severities and how a row is found for a
key: ``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("scaled_mm", "f_scaled_mm", "grouped", "emulated_mlp")

_M = KeyMeaning
# the first row that matches a key wins: the specific rows come before the general ones
MEANINGS: tuple[KeyMeaning, ...] = (
    # --- torch._scaled_mm and F.scaled_mm ------------------------------------------------------------
    _M(
        "scaled_mm.accum_bits.*.*",
        "_scaled_mm",
        "mantissa bits _scaled_mm's accumulator keeps {1} K blocks, with {2} accumulation "
        "(exact: use_fast_accum off; fast: on)",
        "fewer bits lose more of every dot product: GEMM outputs, and so losses, move",
        "numerics",
    ),
    _M(
        "scaled_mm.promotion_interval.*",
        "_scaled_mm",
        "how often _scaled_mm adds its partial sums into a float32 accumulator ({1} accumulation)",
        "a longer interval loses more of long dot products (large K): GEMM outputs move",
        "numerics",
    ),
    _M(
        "scaled_mm.kernels.*",
        "_scaled_mm",
        "which kernels a {1} _scaled_mm ran (on the CPU: the aten GEMM ops; it follows versions.cpu_amx)",
        "mostly speed: the accumulator keys pin what the numbers do",
        "cosmetic",
    ),
    _M(
        "scaled_mm.form.**",
        "_scaled_mm",
        "whether _scaled_mm accepts the scale form or shape {1}",
        "a recipe that passes scales in that form (or GEMMs of that shape) runs or is refused",
        "refusal",
    ),
    _M(
        "scaled_mm.scale_result.*",
        "_scaled_mm",
        "what scale_result does to an FP8 ({1}) output: multiplies or divides",
        "an FP8 output (FP8 all the way through) comes out scaled by s or 1/s",
        "numerics",
    ),
    _M(
        "scaled_mm.*.*",
        "_scaled_mm",
        "whether _scaled_mm runs {1} scaling with {2} output on this device",
        "a recipe built on {1} scaling (torchao's rowwise recipes, MX, NVFP4, DeepSeek-style blocks) runs "
        "or is refused",
        "refusal",
    ),
    _M(
        "f_scaled_mm.*.*",
        "_scaled_mm",
        "whether torch.nn.functional.scaled_mm runs a {1} GEMM with {2} output on this device",
        "FP4 training and inference through {1} runs or is refused",
        "refusal",
    ),
    # --- training through the emulated GEMMs ---------------------------------------------------------
    _M(
        "emulated_mlp.loss.*",
        "training",
        "the loss at {1} of a small MLP trained with fp8ref's emulated FP8 GEMMs on torch's casts and "
        "matmuls (compared within 2%: it depends on summation order)",
        "the whole training loop's numbers moved: casts, matmuls, AdamW or autograd",
        "numerics",
    ),
    # --- mixture-of-experts grouped GEMMs ----------------------------------------------------------------
    _M(
        "grouped.**",
        "grouped GEMMs",
        "whether the grouped GEMM {1} (torch's _grouped_mm, torchao's FP8 rowwise or MXFP8 MoE training GEMM) "
        "runs forward and backward here: 'runs' (its numbers are held to fp8ref's grouped reference by "
        "tests/cpu/install/test_grouped_gemm.py), or the refusal",
        "mixture-of-experts training through that path starts or stops running here (torchao's MXFP8 weight "
        "gradient refuses a group that is not a multiple of 32 tokens unless the groups are padded)",
        "refusal",
    ),
)
