"""torchao's MX conversion in every scale mode it offers (FLOOR, RCEIL, CEIL, EVEN) and every
block size, for each element format, against fp8ref's definition of each mode at the amax values
that decide it (fp8ref/harness/ao/mx_modes.py builds them). A block size or mode the install refuses
is recorded; a row that ends inside a block is refused by the reference, and torchao's answer is
pinned (``torchao.mx.partial_block``)."""

import pytest
import torch

from fp8ref.harness.ao import torchao_compat as ao
from fp8ref.harness.ao.mx_modes import MODES, every_block_size_problem, partial_block_answer
from fp8ref.reference.formats import select
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import mx

pytestmark = pytest.mark.needs("torchao")

MX_FORMATS = [pytest.param(f, id=f.name) for f in select(mx_element=True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_every_block_size_scales_like_the_definition_of_its_mode(fmt, mode, record_observation, record_defect):
    problem = every_block_size_problem(ao.to_mx, fmt, mode, "torchao", record_observation, record_defect)
    assert problem is None, problem


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_a_row_ending_inside_a_block_is_refused_by_the_reference(fmt, record_observation):
    with pytest.raises(ValueError, match="last dim to be a multiple of 32"):
        quantize(torch.ones(2, 48), fmt, mx(32))
    record_observation(f"torchao mx {fmt.name}: a 48-element row in blocks of 32", partial_block_answer(ao.to_mx, fmt))
