"""What each behaviour-profile key means, and what a change of it does to a training run: the one
table the upgrade report (``upgrade_report``) reads, and which every key the profile can hold must
match (``tests/cpu/tools/test_key_meanings.py`` fails naming a key without a row).

A row's pattern is the key with ``*`` for a dotted part or the rest of one (``from_*``) and ``**``
(last) for the rest of the key; its
texts may name the parts ``*`` matched as ``{1}``, ``{2}``, ... The first row that matches wins,
so the specific rows come before the general ones. Severity is what a change of the key can do:

- ``numerics``: it can silently change the numbers a training run computes (a cast that overflows
  to NaN instead of saturating, a scale rounded another way, a checkpoint that loses a field);
- ``refusal``: it changes which paths run and which are refused (a run that worked may now stop
  with an error, or a path that was refused now runs and is worth checking);
- ``cosmetic``: neither (a NaN's bit pattern, an error message's words, which kernel ran where
  the accumulator keys pin the numbers).

The one rule for a change's severity (``severity_of``), by what kind of value each side holds
(``value_kind``: an answer, refused, fails, absent, not installed): a change into or out of
refused, fails, absent or not installed is a ``refusal`` change (which paths run changed); a
change between two messages of the same kind is ``cosmetic`` (other words for the same state);
a change between two answers has the row's severity. No torch: ``python -m fp8ref diff`` reads
this table.
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache

__all__ = [
    "SEVERITIES",
    "KeyMeaning",
    "MEANINGS",
    "meaning_of",
    "describe",
    "severity_of",
    "is_refusal",
    "value_kind",
    "direction",
]

# most serious first: the report's order
SEVERITIES = {
    "numerics": "can silently change training numbers",
    "refusal": "change which paths run or are refused",
    "cosmetic": "change neither numbers nor which paths run",
}


@dataclasses.dataclass(frozen=True)
class KeyMeaning:
    pattern: str
    family: str
    meaning: str
    consequence: str
    severity: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity: expected one of {sorted(SEVERITIES)}, got {self.severity!r}")

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    pieces = pattern.split(".")
    if "**" in pieces[:-1]:
        raise ValueError(f"pattern {pattern!r}: '**' only as its last part")
    parts = ["(.+)" if p == "**" else "([^.]+)".join(re.escape(x) for x in p.split("*")) for p in pieces]
    return re.compile(r"\.".join(parts) + r"\Z")


_SRC = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64"}
_OVERFLOW = (
    "an activation or gradient that outgrows its scale (a spike before delayed scaling catches up, a "
    "static scale set too small) becomes inf/NaN and spreads through the loss instead of clipping at max"
)

_M = KeyMeaning
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
    # --- training through the emulated GEMMs ---------------------------------------------------------
    _M(
        "emulated_mlp.loss.*",
        "training",
        "the loss at {1} of a small MLP trained with fp8ref's emulated FP8 GEMMs on torch's casts and "
        "matmuls (compared within 2%: it depends on summation order)",
        "the whole training loop's numbers moved: casts, matmuls, AdamW or autograd",
        "numerics",
    ),
    # --- torchao's FP8 surface --------------------------------------------------------------------------
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
    # --- torch's native float8 ops ---------------------------------------------------------------------
    _M(
        "native.deviation.*",
        "native float8 ops",
        "whether torch still gives the named deviation {1} from the definition (fp8ref/harness/casts/deviations.py), "
        "and on which float8 dtypes",
        "the op's answer on the inputs the deviation names changed: torch fixed it, or broke it further",
        "numerics",
    ),
    _M(
        "native.written.*.*",
        "native float8 ops",
        "what writing Python scalars and float64/float32 values into a {1} tensor by {2} gives: 'as .to' "
        "(the cast's codes, any NaN for a NaN) and the values it refuses, or the codes where it differs",
        "a value written another way than it is cast (a fill, a pad value, a loss-scale constant) lands on "
        "another code, or stops the write with an error",
        "numerics",
    ),
    _M(
        "native.scalar.*",
        "native float8 ops",
        "what {1} of a float8 tensor and a Python scalar does, per float8 dtype: refused, or the scalar taken "
        "exactly ('exact') or rounded into the float8 dtype first ('rounded': e5m2 t == 500.0 holds for 512, "
        "e4m3fn t == inf for 448); '+partial': some scalars refused; 'differs': neither (a wrong answer)",
        "a mask or loss-scale step written with a Python scalar (t == 0, t * 0.5) selects or computes other "
        "values, or starts or stops being refused",
        "numerics",
    ),
    _M(
        "native.**",
        "native float8 ops",
        "on which float8 dtypes torch's {1} runs its catalogued samples ('all run', or per dtype; 'partial': "
        "runs some, refuses others); an op refused on every float8 dtype has no key",
        "a kernel added (the key appears: a path that now runs, checked by tests/cpu/install/test_native_ops.py) "
        "or removed (the key goes: a path that stops with an error, e.g. FSDP's or a checkpoint loader's copy "
        "of float8 weights)",
        "refusal",
    ),
    _M(
        "native",
        "native float8 ops",
        "whether torch's op catalogue (OpInfo, which needs expecttest) imports, to find its float8 ops",
        "without it no native op is discovered or checked",
        "refusal",
    ),
    # --- the FP8 API surface ---------------------------------------------------------------------------
    _M(
        "surface.promote.*.*",
        "type promotion",
        "torch.promote_types of {1} with {2}: the dtype a mixed op computes in, or the refusal",
        "a float8 tensor mixed with {2} (a mask, a scale, a bias) computes in another dtype, or starts or "
        "stops being refused",
        "numerics",
    ),
    _M(
        "surface.result_type.*.*",
        "type promotion",
        "torch.result_type of a {1} tensor with a Python {2}: float8 means the scalar is rounded into {1} "
        "before the op",
        "a Python constant applied to float8 data (a loss scale, an epsilon) is rounded into float8 first, or "
        "no longer",
        "numerics",
    ),
    _M(
        "surface.add.*.*",
        "type promotion",
        "what a + b does with a {1} tensor and a {2} tensor: its result dtype (held to the promotion table and "
        "the exact sum), or the refusal",
        "mixed float8 arithmetic runs in another dtype, gives other values, or starts or stops being refused",
        "numerics",
    ),
    _M(
        "surface.schema.*",
        "API surface",
        "the dispatcher's schema of torch's {1} (its arguments and defaults)",
        "an argument added, removed or with a new default: calls written for the old one fail, or change "
        "meaning silently where a default moved",
        "refusal",
    ),
    _M(
        "surface.signature.**",
        "API surface",
        "the Python signature of torch.nn.functional.scaled_mm, the API torch routes MX and FP4 GEMMs through",
        "calls written for another signature fail",
        "refusal",
    ),
    _M(
        "surface.enum.F.*",
        "API surface",
        "the members of torch.nn.functional.{1} (the scalings and swizzles a scaled GEMM takes)",
        "a scaling added (a path to check) or removed (a recipe that stops running)",
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


def meaning_of(key: str) -> tuple[KeyMeaning, tuple[str, ...]] | None:
    """The first row of ``MEANINGS`` that matches ``key``, with the parts its ``*`` matched; None
    when no row does."""
    if not isinstance(key, str):
        raise TypeError(f"key: expected a profile key (str), got {type(key).__name__}")
    for row in MEANINGS:
        m = row.regex.match(key)
        if m:
            return row, m.groups()
    return None


def describe(row: KeyMeaning, parts: tuple[str, ...]) -> tuple[str, str]:
    """The row's meaning and consequence with the matched parts filled in (``{1}``, ...), dtype
    tags written out (bf16 -> bfloat16)."""
    names = {str(i + 1): _SRC.get(p, p) for i, p in enumerate(parts)}

    def fill(text: str) -> str:
        return re.sub(r"\{(\d+)\}", lambda m: names.get(m.group(1), m.group(0)), text)

    return fill(row.meaning), fill(row.consequence)


def value_kind(value: object) -> str:
    """What a profile value says: ``refused`` (the install declines: ``refused: ...``, ``crashed:
    ...``, an op refused on every dtype ``all refused``), ``fails`` (an error on an input it
    supports: ``fails: ...``), ``absent`` (the profile holds no such key), ``not installed``
    (``missing ...``, ``not installed``) or ``answer`` (anything else)."""
    if not isinstance(value, str):
        return "answer"
    if value == "<absent>":
        return "absent"
    if value.startswith(("missing", "not installed")):
        return "not installed"
    if value.startswith("fails"):
        return "fails"
    if value.startswith(("refused", "crashed")) or value == "all refused":
        return "refused"
    return "answer"


def is_refusal(value: object) -> bool:
    """A value that says the install has no answer (``value_kind`` other than ``answer``)."""
    return value_kind(value) != "answer"


def severity_of(row: KeyMeaning, old: object, new: object) -> str:
    """The severity of one key's change from ``old`` to ``new`` (the module docstring's rule):
    into or out of a non-answer, ``refusal``; two messages of one non-answer kind, ``cosmetic``;
    two answers, the row's severity."""
    a, b = value_kind(old), value_kind(new)
    if a != b:
        return "refusal"
    return row.severity if a == "answer" else "cosmetic"


_DIRECTIONS = {
    ("answer", "refused"): "now refused: a run that takes this path stops with the install's error",
    ("answer", "fails"): "now fails on an input it supports: a run that takes this path stops with an error",
    ("refused", "answer"): "now runs (refused before): a path worth checking, its numbers are new",
    ("fails", "answer"): "now runs (failed before): its numbers are new",
    ("answer", "absent"): "no longer reported: the probe's path or its package is gone",
    ("absent", "answer"): "newly reported: a path or package the other side did not have",
    ("answer", "not installed"): "not installed on the new side: its paths do not run there",
    ("not installed", "answer"): "installed on the new side: its paths run there",
}


def direction(old: object, new: object) -> str | None:
    """What a change of value kind means, read from ``old`` to ``new`` (``now refused: ...``),
    or None when both are of one kind."""
    a, b = value_kind(old), value_kind(new)
    if a == b:
        return None
    return _DIRECTIONS.get((a, b), f"{a} -> {b}")
