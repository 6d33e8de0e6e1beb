"""A compiled region that computes other float8 codes than its eager ops: a torch.compile backend
that rounds every float8 output one code toward zero (a miscompiled cast). The tracer runs
compiled code eagerly, so its op-by-op checks cannot see it; the boundary check
(``trace.compiled.compare_compiled``, tests/cpu/install/test_workloads.py) must: through the
program's result, and through the region's own outputs where the result does not carry them (a
program that returns only whether its codes are nonzero)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from fp8ref.harness.trace.compiled import compare_compiled
from fp8ref.harness.workloads import compiled as workload

E4M3 = torch.float8_e4m3fn


def _miscompiling_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    def run(*args: object) -> object:
        out = gm(*args)
        leaves = out if isinstance(out, (list, tuple)) else [out]
        for t in leaves:
            if isinstance(t, torch.Tensor) and t.dtype == E4M3:
                codes = t.view(torch.uint8)
                magnitude = codes & 0x7F
                codes.copy_(torch.where((magnitude > 0) & (magnitude < 0x7F), codes - 1, codes))
        return out

    return run


def _run(backend: Any) -> list[torch.Tensor]:
    torch._dynamo.reset()
    region = torch.compile(workload._layer, backend=backend, dynamic=False) if backend else workload._layer
    w = torch.full((16, 16), 0.5).to(E4M3)
    x = torch.linspace(-3, 3, 16 * 16).reshape(16, 16).to(torch.bfloat16)
    out, codes = region(x, w)
    return [out, codes]


def _run_hiding_the_codes(backend: Any) -> bool:
    """The region's codes feed only a yes or no: the same answer, compiled right or wrong."""
    out, codes = _run(backend)
    return bool(codes.view(torch.uint8).bool().any())


def compiled_fault_caught() -> bool:
    boundary = compare_compiled(functools.partial(_run, _miscompiling_backend))
    return bool(boundary.differs) and not boundary.eager.violations


def test_a_miscompiled_region_the_result_does_not_carry_is_caught_by_its_own_outputs():
    boundary = compare_compiled(functools.partial(_run_hiding_the_codes, _miscompiling_backend))
    torch._dynamo.reset()
    assert boundary.eager.result is True and boundary.compiled.result is True  # (the result alone: equal)
    (name,) = boundary.regions
    line = inspect.getsourcelines(workload._layer)[1]
    assert name.startswith("_layer (") and name.endswith(f"fp8ref/harness/workloads/compiled.py:{line})"), name
    assert boundary.differs and all(
        d.startswith(f"region {name}, call 0: output 1 (torch.float8_e4m3fn") for d in boundary.differs
    ), boundary.differs


def test_the_boundary_check_passes_a_backend_that_compiles_right():
    """aot_eager runs the region's aten ops through the dispatcher: the compiled run sees them all."""
    boundary = compare_compiled(functools.partial(_run, "aot_eager"))
    assert boundary.problems() == [], boundary.problems()
    assert boundary.unseen == {}, boundary.unseen
    assert len(boundary.regions) == 1 and list(boundary.regions.values()) == [1], boundary.regions
    assert {"aten._to_copy.default", "aten._scaled_mm.default"} <= {r.op for r in boundary.compiled.records}
    torch._dynamo.reset()


def test_a_miscompiled_cast_is_caught_at_the_regions_boundary():
    assert compiled_fault_caught()
    torch._dynamo.reset()
