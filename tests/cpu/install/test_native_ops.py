"""torch's native float8 ops, discovered from torch's own op catalogue (OpInfo) rather than
listed here: which run on each float8 dtype (pinned in the profile as ``native.<op>``), each op
that runs held to the definition by its kind (data movement bitwise against the uint8 view,
values written as ``.to`` writes them, arithmetic and comparisons as the exact result rounded
once; fp8ref/harness/native/native_op_kinds.py), every way of writing a Python scalar into float8, and an
account of what ran, what was refused and what is left unchecked with its reason.

Why a check may fail: a torch release that adds a float8 kernel (an op that starts to run) adds
it here at once; if the kinds table names no check for it, the coverage test fails naming it, and
if it gets -0, a NaN or a code wrong, its check fails naming the sample and the codes. Known
deviations from the definition are excused for their exact answer only
(``deviations.NATIVE_OP_DEVIATIONS``, with the versions they were seen on)."""

import pytest

from fp8ref.harness.native import native_ops
from fp8ref.harness.native import op_account as noc
from fp8ref.harness.native.layouts import LAYOUTS
from fp8ref.harness.native.native_checks import WRITE_PATHS, check_copy, check_written
from fp8ref.harness.native.native_op_kinds import KINDS, kind_of
from fp8ref.harness.native.strided_writes import WRITES, check_strided_writes
from fp8ref.harness.stack import install, probes
from tests.common.params import on_devices

pytestmark = pytest.mark.needs("expecttest")


@pytest.fixture(scope="module")
def matrix(skip_if_refused):
    skip_if_refused(native_ops.catalogue_refusal(), "torch's op catalogue (OpInfo)")
    return native_ops.support_matrix("cpu")


def test_every_op_that_runs_on_float8_has_a_check_or_a_reason(matrix, record_section):
    record_section(
        f"native float8 ops on cpu ({install.versions_line()})", noc.account(matrix, native_ops.judgements("cpu"))
    )
    missing = noc.uncovered(matrix)
    assert not missing, (
        f"{install.versions_line()} runs these float8 ops, which no check covers: {missing}; give each a kind "
        "or a reason in fp8ref/harness/native/native_op_kinds.py"
    )


def test_the_catalogue_finds_the_ops_training_moves_fp8_through(matrix):
    """The catalogue is torch's: if it loses the ops this suite checks in its default run, the
    checks below would skip green."""
    absent = [name for name in noc.TRAINING_OPS if name not in matrix]
    assert not absent, f"torch's OpInfo catalogue has no {absent} ({install.versions_line()})"
    assert noc.runs_on(matrix, "cat") and noc.runs_on(matrix, "clone"), "cat and clone run on no float8 dtype"


@pytest.mark.parametrize("name", noc.TRAINING_OPS)
def test_an_op_training_moves_fp8_through_keeps_to_the_definition(
    name, matrix, skip_if_refused, record_observation, record_defect
):
    formats = noc.runs_on(matrix, name)
    # (an op is judged on its first native_ops.JUDGED catalogue samples, in every layout: this
    # skip says none of them ran on any float8 dtype)
    refused = (
        f"refused on each of its first {native_ops.JUDGED} catalogue samples on every float8 dtype "
        f"({native_ops.matrix_word(matrix[name])})"
    )
    skip_if_refused(None if formats else refused, name)
    checks = noc.checked([name], matrix, "cpu")
    for c in checks:
        for key, value in c.observed.items():
            record_observation(f"native {key}", value)
        for key, n in c.known_deviations.items():
            record_observation(f"native {c.op} on {c.fmt}: deviation {key}", f"{n} elements excused")
            record_defect(key, f"torch {c.op} on {c.fmt}", n)
    assert sum(c.samples for c in checks) > 0, f"{name}: no sample reached it on {formats}"
    bad = noc.problems(checks)
    assert not bad, f"{install.versions_line()}:\n" + "\n".join(bad[:8])


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_every_op_of_a_kind_that_runs_keeps_to_the_definition(kind, matrix):
    names = sorted(n for n in matrix if kind_of(n) == kind and noc.runs_on(matrix, n))
    checks = noc.checked(names, matrix, "cpu")
    empty = [f"{c.op} on {c.fmt}" for c in checks if c.samples == 0]
    assert not empty, f"{install.versions_line()}: judged to run, yet no sample reached the check: {empty}"
    bad = noc.problems(checks)
    assert not bad, f"{install.versions_line()}, {len(names)} {kind} ops:\n" + "\n".join(bad[:12])


@on_devices()
@pytest.mark.parametrize("fmt", [f.name for f in probes.float8_formats()])
def test_copy_between_memory_layouts_moves_every_code_and_nothing_else(fmt, device, record_observation):
    """Tensor.copy_ float8 into float8 (bit for bit), float32 into float8 (as .to writes) and
    float8 into float32 (the definition's values), with source and destination each contiguous,
    transposed, sliced, stepped, at an offset and channels_last (fp8ref/harness/native/layouts.py):
    a kernel that reads or writes in memory order, or writes a destination view's gaps, is right on
    contiguous tensors alone. A case the install refuses is named here, not failed; if it refuses
    every case, nothing was checked and the test skips saying so."""
    problems, refused = check_copy(next(f for f in probes.float8_formats() if f.name == fmt), device)
    for case, words in refused.items():
        record_observation(f"native {case} on {fmt} ({device}): refused", words)
    assert not problems, f"{install.versions_line()}, {device}:\n" + "\n".join(problems[:8])
    if len(refused) == 3 * len(LAYOUTS) ** 2:
        words = next(iter(refused.values()))
        pytest.skip(f"{install.versions_line()} refuses copy_ of {fmt} on {device} in every layout: {words}")


@on_devices()
@pytest.mark.parametrize("fmt", [f.name for f in probes.float8_formats()])
def test_writes_into_a_strided_destination_touch_its_addressed_elements_alone(fmt, device, record_observation):
    """fill_, zero_, t[:, 1] = v, t[mask] = v, index_put_ and masked_fill_ into a float8 view
    laid out transposed, sliced, stepped, at an offset or channels_last (as into a slice of a fused
    buffer): .to's code on the elements addressed, the others' codes kept, no byte outside the view
    written (fp8ref/harness/native/strided_writes.py). What the install refuses in every layout is
    named here; refused in a layout while a contiguous destination is written, it fails."""
    problems, refused = check_strided_writes(next(f for f in probes.float8_formats() if f.name == fmt), device)
    for how in WRITES:  # (one line a write: refused in one layout and not another fails below)
        words = {w for case, w in refused.items() if case.startswith(f"{how} into")}
        if words:
            record_observation(
                f"native {how} into {fmt} ({device}): refused in every layout", " / ".join(sorted(words))
            )
    assert not problems, f"{install.versions_line()}, {device}:\n" + "\n".join(problems[:8])
    if len(refused) == len(WRITES) * len(LAYOUTS):
        words = next(iter(refused.values()))
        pytest.skip(f"{install.versions_line()} refuses every write into {fmt} on {device}: {words}")


@pytest.mark.parametrize("fmt", [f.name for f in probes.float8_formats()])
def test_a_scalar_written_into_float8_lands_where_to_puts_it(fmt):
    """fill_, t[:] = v, full, full_like, new_full, torch.tensor, pad(value=), copy_ from float64:
    zeros of both signs, +-1, +-max, past max, +-inf, NaN, the smallest subnormal and half of it,
    and a value just above a tie. A path that refuses some values (fill_ refuses what overflows)
    is pinned (native.written.*), not failed; one that lands elsewhere than .to fails."""
    words = check_written(next(f for f in probes.float8_formats() if f.name == fmt))
    assert set(words) == set(WRITE_PATHS)
    differs = {how: w for how, w in words.items() if w.startswith("differs")}
    assert not differs, f"{install.versions_line()}, {fmt}: {differs}"


def test_a_scaled_gemm_sample_keeps_its_scales_float32(matrix):
    """torch's catalogue gives _scaled_mm float8 operands and float32 scales: the format's codes go
    into the operands alone (a float8 scale is an argument torch's scaled GEMM may refuse, which
    would pin a refusal of fp8ref's making, one that varies between CPUs)."""
    op = native_ops.catalogue().get("torch._scaled_mm")
    if op is None:
        pytest.skip(f"{install.versions_line()}: the catalogue has no torch._scaled_mm")
    e5m2 = next(f for f in probes.float8_formats() if f.name == "e5m2")
    (sample, *_) = native_ops.samples(op, e5m2, limit=1)
    inp, args, _ = sample.ways["float8"]
    tensors = [inp, *(a for a in args if hasattr(a, "dtype"))]
    dtypes = [str(t.dtype) for t in tensors]
    assert dtypes[:2] == ["torch.float8_e5m2"] * 2 and set(dtypes[2:]) == {"torch.float32"}, dtypes
