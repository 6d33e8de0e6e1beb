"""What each of this family's profile keys means, and what a change of it does to a training run:
torch's native float8 ops, Python scalars with them, and the FP8 API surface. The keys are measured
in ``profile_keys.py``; the rows' form, the severities and how a row is found for a key:
``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("native", "surface")

_M = KeyMeaning
# the first row that matches a key wins: the specific rows come before the general ones
MEANINGS: tuple[KeyMeaning, ...] = (
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
        "on which float8 dtypes torch's {1} runs its first 16 catalogued samples, and each other memory layout "
        "where it is checked ('all run', or per dtype; 'partial': runs some samples or layouts, refuses others); "
        "an op refused on every float8 dtype has no key",
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
)
