"""The native float8 op checks of tests/cpu/install/test_native_ops.py on the CUDA device (or the
CPU under --fp8-dry-run): which of torch's catalogued ops run on each float8 dtype there, the ops
training moves FP8 numbers through held to the definition on every code, the ops that run on the
device but not on the CPU (which the CPU suite never sees) accounted for and held to their kind,
every write of a Python scalar held to .to, and Python scalars in float8 arithmetic and comparisons."""

import pytest

from fp8ref.harness.native import device_only_ops as dno
from fp8ref.harness.native import native_ops
from fp8ref.harness.native import op_account as noc
from fp8ref.harness.native.native_checks import check_written
from fp8ref.harness.native.scalar_ops import SCALAR_OPS, check_scalar_op
from fp8ref.harness.stack import install, probes

pytestmark = pytest.mark.needs("expecttest")


@pytest.fixture(scope="module")
def matrix(gpu_device, skip_if_refused):
    skip_if_refused(native_ops.catalogue_refusal(), "torch's op catalogue (OpInfo)")
    return native_ops.support_matrix(gpu_device)


@pytest.fixture(scope="module")
def cpu_matrix(matrix):
    """The same catalogue on the CPU (the same dict under --fp8-dry-run: no op is device-only there)."""
    return native_ops.support_matrix("cpu")


def test_every_op_that_runs_on_float8_here_has_a_check_or_a_reason(matrix, cpu_matrix, gpu_device, record_section):
    only = dno.device_only(matrix, cpu_matrix)
    record_section(
        f"native float8 ops on {gpu_device} ({install.versions_line()})",
        [
            *noc.account(matrix, native_ops.judgements(gpu_device)),
            f"  run on {gpu_device} and not on the CPU: {len(only)}" + (f" ({', '.join(only)})" if only else ""),
        ],
    )
    lines = dno.unaccounted(matrix, cpu_matrix, gpu_device, install.versions_line())
    assert not lines, "\n".join(lines)


def test_the_ops_training_moves_fp8_through_keep_to_the_definition(matrix, gpu_device):
    bad = noc.problems(noc.checked(noc.TRAINING_OPS, matrix, gpu_device))
    assert not bad, f"{install.versions_line()} on {gpu_device}:\n" + "\n".join(bad[:8])


def test_the_ops_only_this_device_runs_keep_to_their_kind(matrix, cpu_matrix, gpu_device):
    """An op given a kind runs through its check in the CPU suite only where the CPU runs it; one
    that runs on float8 only on this device is checked here, on every code of every dtype it takes."""
    bad = noc.problems(dno.device_only_checks(matrix, cpu_matrix, gpu_device))
    assert not bad, f"{install.versions_line()} on {gpu_device}:\n" + "\n".join(bad[:8])


def test_a_scalar_written_into_float8_lands_where_to_puts_it(gpu_device):
    for fmt in probes.float8_formats():
        differs = {h: w for h, w in check_written(fmt, gpu_device).items() if w.startswith("differs")}
        assert not differs, f"{install.versions_line()} on {gpu_device}, {fmt.name}: {differs}"


def test_a_python_scalar_in_float8_arithmetic_gives_the_definitions_answer(gpu_device):
    bad = [p for f in probes.float8_formats() for n in SCALAR_OPS for p in check_scalar_op(n, f, gpu_device).problems]
    assert not bad, f"{install.versions_line()} on {gpu_device}:\n" + "\n".join(bad[:8])
