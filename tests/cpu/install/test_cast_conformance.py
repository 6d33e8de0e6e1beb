"""torch's native casts and ml_dtypes' casts against the codec: exhaustive where the space is
small, structured and property-based for float32, a full 2^32 sweep behind --fp8-slow.

In-range inputs must match the codec bitwise, but where a known deviation from the definition
(``fp8ref.harness.casts.deviations``: named implementations, exact inputs, exact answer) explains the
difference: that is counted, printed and, for torch, pinned in the profile. Out-of-range inputs
(finite overflow, +-inf, E8M0's zero and negatives) are implementation-defined: each
implementation's mode is observed, every such input is checked against the codec in that mode,
and the mode is printed in the
"FP8 cast conformance" section at the end of the run.
"""

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import all_16bit_inputs, float32_structured_inputs
from fp8ref.harness.casts.conformance import check_cast, merge_reports
from fp8ref.harness.casts.deviations import DEVIATIONS, observe
from fp8ref.harness.casts.implementations import ml_dtypes_cast, torch_cast
from fp8ref.harness.casts.sweep import sweep_float32
from fp8ref.harness.stack import probes
from fp8ref.reference.codec import decode, encode
from fp8ref.reference.definition import round_by_definition
from fp8ref.reference.formats import select
from tests.common.params import TORCH_FORMATS


def _impl(name, fmt, skip_if_refused):
    if name == "ml_dtypes":
        impl = ml_dtypes_cast(fmt)
    else:
        skip_if_refused(probes.torch_dtype_refusal(fmt), f"casts to {fmt.name}")
        impl = torch_cast(fmt, "cpu")
    if impl is None:
        pytest.skip(f"{name} has no {fmt.name} on this install")
    return impl


IMPLS = ["torch", "ml_dtypes"]
CASES = [
    pytest.param(f, i, id=f"{f.name}-{i}", marks=[pytest.mark.needs("ml_dtypes")] if i == "ml_dtypes" else [])
    for f in select(has_torch_dtype=True)
    for i in IMPLS
]


@pytest.mark.exhaustive
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("fmt,impl_name", CASES)
def test_all_16bit_patterns_cast_like_the_codec(fmt, impl_name, dtype, record_cast_report, skip_if_refused):
    impl = _impl(impl_name, fmt, skip_if_refused)
    x = all_16bit_inputs(dtype)
    report = check_cast(impl, x, fmt, f"all {dtype}".replace("torch.", ""))
    record_cast_report(report)
    assert sum(report.counts.values()) == 1 << 16
    assert report.ok, report.failure_message()


@pytest.mark.exhaustive
@pytest.mark.parametrize("fmt,impl_name", CASES)
def test_all_256_codes_decode_like_the_codec(fmt, impl_name, skip_if_refused):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    want = decode(codes, fmt)
    if impl_name == "torch":
        skip_if_refused(probes.torch_dtype_refusal(fmt), f"decodes {fmt.name}")
        got = codes.view(fmt.torch_dtype()).float()
        who = f"torch {torch.__version__}"
    else:
        import ml_dtypes
        import numpy as np

        got = torch.from_numpy(codes.numpy().view(fmt.ml_dtype()).astype(np.float32))
        who = f"ml_dtypes {ml_dtypes.__version__}"
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    # -0.0 == 0.0 numerically: compare the sign bit too
    same &= (torch.signbit(got) == torch.signbit(want)) | torch.isnan(want)
    bad = (~same).nonzero().flatten().tolist()
    assert not bad, f"{who} decodes {fmt.name} differently: " + ", ".join(
        f"0x{c:02x}: expected {want[c].item()!r}, got {got[c].item()!r}" for c in bad[:8]
    )


@pytest.mark.parametrize(
    "inputs", ["representable", "midpoints", "midpoints_pm_ulp", "overflow_boundary", "subnormal_range", "specials"]
)
@pytest.mark.parametrize("fmt,impl_name", CASES)
def test_float32_structured_inputs_cast_like_the_codec(fmt, impl_name, inputs, record_cast_report, skip_if_refused):
    impl = _impl(impl_name, fmt, skip_if_refused)
    x = float32_structured_inputs(fmt)[inputs]
    report = check_cast(impl, x, fmt, f"float32 {inputs}")
    record_cast_report(report)
    assert report.ok, report.failure_message()


@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_midpoints_round_to_the_even_neighbour_in_both_directions(fmt):
    """The structured midpoints really are ties that go both ways: some round down and some
    up (otherwise the midpoint set would not exercise ties-to-even)."""
    x = float32_structured_inputs(fmt)["midpoints"]
    x = x[x > 0]
    codes = encode(x, fmt)
    r = decode(codes, fmt)
    if fmt.man_bits:
        assert bool((r < x).any()) and bool((r > x).any())
        assert bool((codes & 1 == 0).all()), "a tie rounded to an odd mantissa"
    else:
        # no mantissa bits: both neighbours have significand 1, and ties-to-even rounds up
        assert bool((r > x).all())


@pytest.mark.needs("hypothesis")
@pytest.mark.parametrize("fmt,impl_name", CASES)
def test_arbitrary_float32_casts_like_the_codec(fmt, impl_name, record_cast_report, skip_if_refused):
    from hypothesis import given
    from hypothesis import strategies as st

    impl = _impl(impl_name, fmt, skip_if_refused)
    reports = []

    @given(
        st.lists(
            st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True), min_size=1, max_size=64
        )
    )
    def check(values):
        x = torch.tensor(values, dtype=torch.float32)
        report = check_cast(impl, x, fmt, "float32 hypothesis")
        reports.append(report)
        assert report.ok, report.failure_message()

    check()
    record_cast_report(merge_reports(reports))


SWEEP_PARTS = 16  # 2^28 patterns each: xdist (or its remote workers) can spread the sweep


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("part", range(SWEEP_PARTS), ids=lambda p: f"part{p:02d}")
@pytest.mark.parametrize("fmt,impl_name", CASES)
def test_all_2pow32_float32_patterns_cast_like_the_codec(fmt, impl_name, part, record_cast_report, skip_if_refused):
    """Every float32 bit pattern, in 16 parts of 2^28 and chunks of 2^20 (``sweep.sweep_float32``:
    a chunk of one input class costs one codec pass and one comparison beyond the cast; a mixed
    chunk gets the full check). The end-of-run summary adds the parts up to 2^32 per case."""
    impl = _impl(impl_name, fmt, skip_if_refused)
    count = (1 << 32) // SWEEP_PARTS
    report = sweep_float32(impl, fmt, part * count, count)
    assert sum(report.counts.values()) == count
    assert report.ok, report.failure_message()
    record_cast_report(report)


@pytest.mark.parametrize("deviation", list(DEVIATIONS), ids=lambda d: f"{d.fmt.name}.{d.key}")
def test_a_known_deviation_excuses_only_an_answer_the_definition_rejects(deviation):
    """A deviation may excuse an implementation only where the definition gives another answer
    on every one of its inputs (so the right answer is never excused), and only inputs of its
    format."""
    x = deviation.probe()
    assert bool(deviation.inputs(x).all()), "the probe inputs lie outside the deviation's own inputs"
    theirs = decode(deviation.answer(x), deviation.fmt).double()
    assert not bool((round_by_definition(x, deviation.fmt) == theirs).any())
    for dtype in (torch.bfloat16, torch.float16):
        band = all_16bit_inputs(dtype)[deviation.inputs(all_16bit_inputs(dtype))]
        right = round_by_definition(band, deviation.fmt)
        assert not bool((right == decode(deviation.answer(band), deviation.fmt).double()).any())


@pytest.mark.parametrize("deviation", list(DEVIATIONS), ids=lambda d: f"{d.fmt.name}.{d.key}")
@pytest.mark.parametrize("impl_name", IMPLS)
def test_which_implementations_deviate_is_observed(deviation, impl_name, record_observation, skip_if_refused):
    """Each implementation the deviation names gives, on its probe inputs, either the definition's
    answer or the deviation's, never a third; which one is observed and printed (torch's is also
    a pinned profile key: ``cast.<fmt>.deviation.<key>``)."""
    impl = _impl(impl_name, deviation.fmt, skip_if_refused)
    seen = observe(impl, deviation)
    record_observation(f"deviation.{deviation.fmt.name}.{deviation.key} [{impl}]", seen)
    assert seen == "definition" or (deviation.applies_to(impl) and seen.startswith("deviates")), seen
