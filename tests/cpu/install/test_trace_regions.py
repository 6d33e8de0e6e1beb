"""The torch.compile regions a program makes, recorded call by call (fp8ref/harness/trace/regions.py):
what ``compare_compiled`` holds region by region. A function region and a module region are
recorded alike eagerly and compiled (a module's own calls, not through its handle, are no
region's), the decorator form too, and ``torch.compile`` is back after the block, whatever it
raised. Why a test may fail: a torch release whose ``torch.compile`` takes its arguments another
way, or whose compiled module calls its forward hooks otherwise."""

from __future__ import annotations

import pytest
import torch

from fp8ref.harness.trace.compiled import bitwise_differences
from fp8ref.harness.trace.regions import compare_regions, regions_recorded

E4M3 = torch.float8_e4m3fn


def _cast(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).to(E4M3)


def _program() -> list[torch.Tensor]:
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 8, bias=False)
    module = torch.compile(linear, backend="eager")
    cast = torch.compile(backend="eager")(_cast)  # (the decorator form)
    x = torch.randn(4, 8)
    out = [cast(module(x)), cast(x)]
    linear(x)  # (the module itself, not through the handle: no region's call)
    return out


def test_a_programs_regions_are_recorded_alike_eagerly_and_compiled(fresh_dynamo):
    real = torch.compile
    with regions_recorded(compiled=False) as eager:
        _program()
    torch._dynamo.reset()
    with regions_recorded(compiled=True) as compiled:
        _program()
    assert torch.compile is real
    compared, differs = compare_regions(eager, compiled, bitwise_differences)
    assert differs == [], differs
    names = sorted(compared)
    assert [n.split(" (")[0] for n in names] == ["Linear", "_cast"] and compared[names[1]] == 2, compared
    assert eager[-1].outputs.dtype == E4M3  # (the region's own output, kept)


def test_a_region_call_one_run_made_and_the_other_did_not_is_named():
    with regions_recorded(compiled=False) as eager:
        _program()
    compared, differs = compare_regions(eager, eager[:-1], bitwise_differences)
    assert len(differs) == 1 and differs[0].endswith("call 1: made eagerly, not compiled"), differs


def test_torch_compile_is_back_after_a_block_that_raised():
    real = torch.compile
    with pytest.raises(RuntimeError, match="the program's own"):
        with regions_recorded(compiled=False):
            assert torch.compile is not real
            raise RuntimeError("the program's own")
    assert torch.compile is real
