"""What each of this family's profile keys means, and what a change of it does to a training run:
torch's finfo of each float8 dtype and every cast into float8 and between float8 dtypes. The keys
are measured in ``profile_keys.py``; the rows' form, the severities and how a row is found for a
key: ``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("cast", "finfo")

_OVERFLOW = (
    "an activation or gradient that outgrows its scale (a spike before delayed scaling catches up, a "
    "static scale set too small) becomes inf/NaN and spreads through the loss instead of clipping at max"
)

_M = KeyMeaning
# the first row that matches a key wins: the specific rows come before the general ones
MEANINGS: tuple[KeyMeaning, ...] = (
    # --- torch's casts into each float8 dtype -----------------------------------------------------
    _M(
        "cast.*.*.in_range_mismatches",
        "casts into float8",
        "values of {2} inside {1}'s range that torch's cast rounds differently from round-to-nearest-even "
        "(the codec, from the format's definition); 0 when every one is right",
        "every FP8 weight, activation or gradient cast from {2} can land one code away from where the "
        "definition puts it: biased rounding accumulates over steps",
        "numerics",
    ),
    _M(
        "cast.*.*.overflow",
        "casts into float8",
        "what a finite {2} value above {1}'s max becomes: 'saturate' (max) or 'nonsaturate' (inf, or NaN "
        "where {1} has no inf)",
        _OVERFLOW,
        "numerics",
    ),
    _M(
        "cast.*.*.inf",
        "casts into float8",
        "what {2} +-inf becomes in {1}: 'saturate' (max) or 'nonsaturate' (inf or NaN)",
        "an inf in an activation or gradient is clipped to max in one case and kept (a NaN loss, a skipped "
        "step) in the other",
        "numerics",
    ),
    _M(
        "cast.*.*.nan_codes",
        "casts into float8",
        "the {1} codes a {2} NaN becomes",
        "a NaN stays a NaN either way; only byte-for-byte comparisons (digests, checkpoint hashes) see it",
        "cosmetic",
    ),
    _M(
        "cast.*.*.no_encoding",
        "casts into float8",
        "what {1}, which has no zero and no sign, makes of a {2} zero or negative value",
        "an MX block scale computed from a zero or negative amax: the block's elements are scaled by "
        "whatever this gives",
        "numerics",
    ),
    _M(
        "cast.*.f32.neg_zero",
        "casts into float8",
        "the {1} code of float32 -0.0 (FNUZ formats have no -0: 0x00)",
        "-0 and +0 are equal in arithmetic; only byte-for-byte comparisons see it",
        "cosmetic",
    ),
    _M(
        "cast.e8m0fnu.f32.ties_and_zero",
        "casts into float8",
        "E8M0 codes of float32 values at rounding ties between powers of two, and of zero",
        "MX block scales that sit at a tie round the other way: a whole block of 32 values moves by a factor of 2",
        "numerics",
    ),
    _M(
        "cast.*.deviation.*",
        "casts into float8",
        "a named deviation of torch's {1} cast from the definition (fp8ref/harness/casts/deviations.py): "
        "present, or gone",
        "the inputs the deviation names are cast differently from the definition; a change means torch "
        "fixed or changed it",
        "numerics",
    ),
    _M(
        "cast.*.f64.rounding",
        "casts into float8",
        "how a float64 value is cast into {1}: rounded once, or through float32 first (two roundings)",
        "a float64 value just beside a tie can land one code away when rounded twice (code that keeps "
        "master weights or statistics in float64)",
        "numerics",
    ),
    _M(
        "cast.*.copy_from_f64.rounding",
        "casts into float8",
        "how copy_ of a float64 tensor into a tensor of {1} rounds: once, or through float32 first",
        "in-place writes of float64 data (a loader, an optimizer) can land one code away from .to's answer",
        "numerics",
    ),
    _M(
        "cast.*.copy_from_*",
        "conversions between float8 dtypes",
        "copy_ of a {2} tensor into a tensor of {1}: 'as .to' when it gives the cast's codes, else its "
        "overflow, inf and NaN answers",
        "copy_ is how FSDP, optimizers and checkpoint loaders write into existing FP8 buffers: a copy_ that "
        "rounds or overflows unlike .to changes the numbers those paths keep",
        "numerics",
    ),
    _M(
        "cast.*.from_*",
        "conversions between float8 dtypes",
        "every {2} code converted to {1} with .to: its overflow, inf and NaN answers, and any in-range "
        "mismatch with the definition",
        "conversions between FP8 formats (E5M2 gradients into E4M3, FNUZ checkpoints loaded as FN) change "
        "values where they overflow or round unlike the definition",
        "numerics",
    ),
    _M(
        "cast.*",
        "casts into float8",
        "whether torch has the {1} dtype and its cast",
        "without it every path that uses {1} is refused",
        "refusal",
    ),
    # --- finfo -----------------------------------------------------------------------------------------
    _M(
        "finfo.*.max",
        "finfo",
        "torch.finfo({1}).max",
        "current scaling computes scale = max / amax: another max scales every tensor differently",
        "numerics",
    ),
    _M(
        "finfo.*.tiny",
        "finfo",
        "torch.finfo({1}).tiny, the smallest normal value",
        "code that clamps amax or scales with finfo.tiny divides by another number",
        "numerics",
    ),
    _M(
        "finfo.*.eps",
        "finfo",
        "torch.finfo({1}).eps, the distance from 1 to the next value",
        "no scaling recipe reads it; tolerances derived from it widen or narrow",
        "cosmetic",
    ),
    _M(
        "finfo.*",
        "finfo",
        "whether torch has {1} (FP4 exists only as a two-per-byte storage dtype)",
        "without it the paths that store {1} are refused",
        "refusal",
    ),
)
