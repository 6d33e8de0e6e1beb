"""Known wrong answers, said first: each named deviation from the definition
(``deviations``) as a defect of the install that shows it, with how much it matters for training.

A deviation is excused in the test that meets it, for its exact inputs and answer, so the run stays
green; but an excused wrong answer is still a wrong answer, and a team that gates an upgrade must
see it before anything else. The end-of-run report therefore opens with every deviation this run
met, its severity and the versions that showed it; ``--fp8-strict`` fails the run on any of them.

Severity, one rule for all:
- ``high``: wrong numbers with no error, on inputs training meets in the ordinary course (any
  ragged weight, any bfloat16 step);
- ``medium``: an error on an input the library claims to support (training stops rather than
  drifts), or wrong numbers on a band of inputs a run meets now and then;
- ``low``: wrong numbers only at isolated boundary inputs (one float32 ulp from a power of two, a
  subnormal band far below any FP8 scale a run uses), which a run meets rarely if ever.
"""

from __future__ import annotations

import dataclasses

# (no torch at import: the upgrade report, which ``python -m fp8ref diff`` builds without torch,
# explains a named deviation with ``severity_of``; ``deviations`` is read only to list them)

__all__ = ["SEVERITIES", "KNOWN_FAILURES", "Defect", "every_deviation", "defect", "severity_of"]

SEVERITIES = ("high", "medium", "low")

# deviation key -> (severity, what it does to training): every named deviation has one
_SEVERITY = {
    "f32_subnormal_grid": (
        "low",
        "an E8M0 scale of 2^-126 where 2^-127 is right, for amaxes below 1.5 x 2^-127: no FP8 recipe scales so small",
    ),
    "rceil_f32_log2": (
        "low",
        "an MX block whose amax is within float32's log2 resolution above max x 2^k gets a scale half the "
        "definition's: its largest element saturates; rare in training",
    ),
    "mx_tiny_scale_clamped_divisor": (
        "low",
        "an MX block with amax below about 2^-119 (scale 2^-127) keeps elements half their value: no training "
        "tensor's blocks are that small",
    ),
    "pow2_f32_log2": (
        "low",
        "a power-of-two float8 scale twice the definition's when the scale is one float32 ulp below 2^k: the "
        "tensor's amax saturates to the format's max; one amax in 2^23 near each power of two",
    ),
    "abs_keeps_negative_zero": (
        "low",
        "abs(-0.0) stays -0.0 on large tensors: equal in value, visible only to sign-aware code and bit digests",
    ),
    "isfinite_e8m0_nan": (
        "medium",
        "a NaN E8M0 scale counts as finite: a check for non-finite scales (delayed scaling's guard) misses it",
    ),
    "count_nonzero_e8m0_smallest": (
        "low",
        "counting nonzero E8M0 scales misses blocks whose scale is 2^-127: a statistic, not a value training "
        "computes with",
    ),
    "scale_through_reciprocal": (
        "low",
        "a block scale one float32 ulp off the correctly rounded 448 / amax for some blocks: codes can differ "
        "by one at a rounding tie",
    ),
    "ue8m0_f32_log2": (
        "low",
        "a UE8M0 inverse scale half the definition's when the inverse lies just above 2^k: the block's "
        "largest element saturates to 448",
    ),
    "loader_blocks_from_grid": (
        "high",
        "a checkpoint weight whose last blocks are ragged loads with wrong values and no error "
        "(from_pretrained(..., dequantize=True)); where the grid does not divide the shape it refuses to load",
    ),
    "fsdp2_uneven_shards_abort": (
        "medium",
        "FSDP2 training with float8 all-gather over gloo stops (a rank aborts) when a weight's rows do not split "
        "evenly over the ranks: pad such weights, or keep them out of float8 all-gather",
    ),
    "backward_scale_in_grad_dtype": (
        "medium",
        "a LoRA step's input gradient through a frozen FP8 layer uses the weight rounded twice in bfloat16 "
        "(up to 2^-8 relative): every bfloat16 fine-tune of an FP8 checkpoint",
    ),
}


# known failures that are no deviation from a format's definition (an error, not an answer):
# key -> (what, seen); their severity and consequence are in _SEVERITY like the deviations'
KNOWN_FAILURES = {
    "fsdp2_uneven_shards_abort": (
        "FSDP2's float8 all-gather of a weight whose rows do not split evenly over the ranks (127 rows over two) "
        "aborts a gloo rank (SIGABRT: the all-gather's sizes disagree); without float8 all-gather it runs",
        "torch 2.9.1 + torchao 0.17.0, 2.13.0, 2.14.1 and 2.15.0 + torchao 0.18.0 on the CPU "
        "(fp8ref/harness/distributed/fsdp_float8.py, UNEVEN_SHARDS_ABORT)",
    ),
}


@dataclasses.dataclass(frozen=True)
class Defect:
    """One deviation met by a run: its key, what it is, the versions it was seen on, its severity
    and what it does to training, and where and how often the run met it."""

    key: str
    severity: str
    consequence: str
    what: str
    seen: str
    where: str
    count: int

    def line(self) -> str:
        return f"[{self.severity}] {self.key}: {self.where}, {self.count:,} excused. {self.consequence}"


def every_deviation() -> dict[str, object]:
    """Every named deviation by key (each key once)."""
    from . import deviations

    out: dict[str, object] = {}
    families: tuple[tuple[object, ...], ...] = (
        deviations.DEVIATIONS,
        deviations.MX_SCALE_DEVIATIONS,
        deviations.MX_ELEMENT_DEVIATIONS,
        deviations.NATIVE_OP_DEVIATIONS,
        deviations.BLOCK_FP8_DEVIATIONS,
        deviations.POW2_SCALE_DEVIATIONS,
    )
    for family in families:
        for d in family:
            key = str(getattr(d, "key"))  # noqa: B009 - every deviation class has one
            if key in out:
                raise ValueError(f"deviation key {key!r} is named twice")
            out[key] = d
    return out


def severity_of(key: str) -> tuple[str, str]:
    """(severity, consequence) of the deviation ``key``."""
    if key not in _SEVERITY:
        raise KeyError(f"deviation {key!r} has no severity in fp8ref/harness/casts/defects.py")
    return _SEVERITY[key]


def defect(key: str, where: str, count: int) -> Defect:
    """The defect of deviation ``key`` met at ``where`` (what ran: implementation, format, path)
    ``count`` times (elements, blocks or inputs excused)."""
    d = every_deviation().get(key)
    if d is not None:
        what, seen = str(getattr(d, "what")), str(getattr(d, "seen"))  # noqa: B009
    elif key in KNOWN_FAILURES:
        what, seen = KNOWN_FAILURES[key]
    else:
        raise KeyError(f"{key!r} names no deviation in fp8ref/harness/casts/deviations.py, nor a known failure")
    severity, consequence = severity_of(key)
    return Defect(key, severity, consequence, what, seen, where, int(count))
