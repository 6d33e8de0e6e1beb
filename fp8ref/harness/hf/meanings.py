"""What each of this family's profile keys means, and what a change of it does to a training run:
transformers' fine-grained FP8 (block checkpoints). The keys are measured in ``profile_keys.py``;
the rows' form, the severities and how a row is found for a key:
``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("transformers",)

_M = KeyMeaning
# the first row that matches a key wins: the specific rows come before the general ones
MEANINGS: tuple[KeyMeaning, ...] = (
    # --- transformers' fine-grained FP8 (block checkpoints) ------------------------------------------
    _M(
        "transformers.fp8",
        "FP8 block checkpoints",
        "whether transformers' fine-grained FP8 (transformers.integrations.finegrained_fp8) imports here",
        "where it does not, no FP8 block checkpoint (DeepSeek-V3, Qwen3-FP8) can be written or loaded "
        "dequantized with this install, and fp8ref's checks of them (quantizer, loader, backward, from_pretrained) "
        "do not run",
        "refusal",
    ),
    _M(
        "transformers.fp8.quantize.passes",
        "FP8 block checkpoints",
        "which weight shapes transformers' Fp8Quantize passes through unquantized (those 128 x 128 blocks do "
        "not divide, and 1-D tensors)",
        "a saved checkpoint keeps those weights in high precision, or starts quantizing them",
        "numerics",
    ),
    _M(
        "transformers.fp8.*.*.576x256",
        "FP8 block checkpoints",
        "what transformers' Fp8Dequantize does with a weight its scale grid does not divide ({2} scales; "
        "DeepSeek-V3's 576-row kv_a_proj_with_mqa): refused, or a dequantization",
        "an FP8 checkpoint with such a weight fails to load with dequantize=True, or starts to load",
        "refusal",
    ),
    _M(
        "transformers.fp8.from_pretrained",
        "FP8 block checkpoints",
        "whether a fine-grained FP8 checkpoint can be loaded here (transformers needs accelerate for it)",
        "the from_pretrained check of FP8 block checkpoints does not run",
        "refusal",
    ),
    _M(
        "transformers.fp8.from_pretrained.*",
        "FP8 block checkpoints",
        "a tiny Qwen3 FP8 checkpoint ({1} scales) written by fp8ref, loaded by from_pretrained with "
        "FineGrainedFP8Config(dequantize=True): 'definition' (bitwise the reference's dequantization), "
        "'deviates: <named deviations>', or 'differs'",
        "a model fine-tuned from an FP8 checkpoint starts from other weights",
        "numerics",
    ),
    _M(
        "transformers.fp8.*.**",
        "FP8 block checkpoints",
        "transformers' fine-grained FP8 {1} ({2}) against fp8ref's block reference: 'definition' (bitwise), "
        "'deviates: <named deviations>' (fp8ref/harness/casts/deviations.py, excused for their exact answer) "
        "or 'differs'",
        "checkpoints are written, loaded or backpropagated through with other numbers (the scales, the block "
        "layout, the rounding of a scale)",
        "numerics",
    ),
)
