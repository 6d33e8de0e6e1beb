"""``convert_to_float8_training`` and a model's parameters: tied weights, module filters by fully
qualified name, an optimizer built before conversion (fp8ref/harness/state/conversion.py)."""

import pytest

from fp8ref.harness.stack import probes
from fp8ref.harness.state.conversion import CHECKS, torchao_convert

pytestmark = pytest.mark.needs("torchao")


@pytest.mark.parametrize("check", list(CHECKS))
def test_conversion_keeps_the_parameters_contract(check, skip_if_refused):
    skip_if_refused(probes.torchao_recipe_refusal("tensorwise"), "torchao's tensorwise Float8Linear on cpu")
    problem = CHECKS[check](torchao_convert)
    assert problem is None, problem
