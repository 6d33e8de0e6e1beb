"""The module check (fp8ref.harness.twin) on correct FP8 modules: the shipped seed-style modules
(static custom op, delayed scaling) and torchao's Float8Linear (tensorwise, rowwise; emulated
where the install refuses the real one) pass every lifecycle event within their derived bounds;
one seed in the default tier, 20 behind --fp8-slow, the margin printed."""

import pytest

from fp8ref.harness.claims import failures, report
from fp8ref.harness.twin import check_module
from fp8ref.harness.twin import examples as ex

pytestmark = [pytest.mark.cpu]

CHECKS = {
    "static_custom_op": ex.static_custom_op,
    "delayed_scaling": ex.delayed_scaling,
    "float8_tensorwise": lambda: ex.float8_linear("tensorwise"),
    "float8_rowwise": lambda: ex.float8_linear("rowwise"),
}


def _needs(name):
    return [pytest.mark.needs("torchao")] if name.startswith("float8") else []


@pytest.mark.parametrize("name", [pytest.param(n, marks=_needs(n)) for n in CHECKS])
def test_correct_module_passes_one_seed(name):
    results = check_module(CHECKS[name]())
    assert not failures(results), report(results)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=_needs(n)) for n in CHECKS])
def test_correct_module_passes_20_seeds(name):
    results = check_module(CHECKS[name](), seeds=range(20))
    print(report(results))  # (the margin: each event's largest error as a fraction of its bound)
    assert not failures(results), report(results)
