"""The tracer (``fp8ref.harness.trace``) against torch kernels broken for float8 inputs only: a
CPU kernel of one aten op replaced through ``torch.library`` for the length of a test (a ``cat``
that flips a bit of its output when an input is not contiguous, a ``_to_copy`` into E4M3FN that
rounds through float16 first, a ``mul`` of two E4M3FN tensors that rounds toward zero). Each must
be a violation naming the op and the line of this file that called it, and nothing else may be."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from fp8ref.harness.stack import probes
from fp8ref.harness.trace import Record, trace
from fp8ref.reference.codec import encode
from fp8ref.reference.formats import E4M3FN
from tests.common.kernels import cpu_kernel_replaced as _broken

E4M3 = torch.float8_e4m3fn


def _line(marker: str) -> str:
    """``file:line`` of the line of this file that ends with ``# <- marker``."""
    lines = Path(__file__).read_text().splitlines()
    (number,) = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# <- {marker}")]
    return f"{__file__}:{number}"


def _into(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` converted by ``copy_`` (no kernel a fault here replaces), its strides kept."""
    return torch.empty_strided(x.shape, x.stride(), dtype=dtype, device=x.device).copy_(x)


# --- the broken kernels: right for every other input, since the whole process runs them ---------------
def _cat_flips_a_bit(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
    dim = dim % tensors[0].dim()
    shape = list(tensors[0].shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    out = torch.empty(shape, dtype=tensors[0].dtype, device=tensors[0].device)
    start = 0
    for t in tensors:
        out.narrow(dim, start, t.shape[dim]).copy_(t)
        start += t.shape[dim]
    if out.dtype == E4M3 and any(not t.is_contiguous() for t in tensors):
        out.view(torch.uint8).view(-1)[5] ^= 0x01
    return out


def _to_copy_through_float16(x: torch.Tensor, *, dtype: Any = None, device: Any = None, **_: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):  # (a wrapped Python number reaches a Python kernel as itself)
        x = torch.tensor(x)
    dtype = dtype or x.dtype
    if dtype == E4M3 and x.dtype == torch.float32:
        x = _into(x, torch.float16)
    out = _into(x, dtype)
    return out if device is None else out.to(device)


def _mul_truncates(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if isinstance(b, torch.Tensor) and a.dtype == b.dtype == E4M3:
        exact = torch.addcmul(torch.full(a.shape, -0.0), _into(a, torch.float32), _into(b, torch.float32))
        return encode(exact, E4M3FN, saturate=True, rounding="rtz").view(E4M3)
    if a.dtype == torch.bool and torch.as_tensor(b).dtype == torch.bool:
        return a & b
    shape = torch.broadcast_shapes(a.shape, torch.as_tensor(b).shape)
    base = torch.full(shape, -0.0, dtype=torch.result_type(a, b))  # (-0 + x is x, -0 included)
    return torch.addcmul(base, a, b)


def _decode_off_by_an_ulp(x: torch.Tensor, *, dtype: Any = None, device: Any = None, **_: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x)
    out = _into(x, dtype or x.dtype)
    if x.dtype == E4M3 and out.dtype == torch.float32:  # float8 read back as float32: one ulp off
        out.view(torch.int32).view(-1)[0] += 1
    return out if device is None else out.to(device)


def _scaled_mm_scales_twice(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    # the product of the decoded operands, with scale_a applied twice (a kernel that reads a scale
    # buffer it already folded in); right where scale_a is 1
    wide = (_into(a, torch.float64) * scale_a.double() ** 2) @ (_into(b, torch.float64) * scale_b.double())
    return _into(wide, out_dtype or torch.bfloat16)


# --- the traced programs ------------------------------------------------------------------------------
def _cat_program() -> None:
    a = torch.arange(-32, 32, dtype=torch.float32).reshape(8, 8).div(4).to(E4M3)
    torch.cat([a, a])  # contiguous: left alone
    torch.cat([a.t(), a], dim=1)  # <- transposed cat


def _cast_program() -> None:
    x = torch.tensor([1.0, 1 + 2**-4 + 2**-12, 3.0, -0.5])  # (1.0625 + 2^-12: float16 ties it, RNE goes up)
    x.to(E4M3)  # <- cast


def _mul_program() -> None:
    a = torch.tensor([1.125, 2.0, -0.5]).to(E4M3)
    b = torch.tensor([1.75, 3.0, 0.25]).to(E4M3)
    a * b  # <- mul


def _decode_program() -> None:
    a = torch.tensor([1.125, -3.0, 448.0]).to(E4M3)
    a.float()  # <- decode


def _scaled_mm_program() -> None:
    a = torch.tensor([[1.0, 2.0] * 8] * 16).to(E4M3)
    b = torch.tensor([[0.5, -1.5] * 8] * 16).to(E4M3).t()
    one, two = torch.tensor(1.0), torch.tensor(2.0)
    torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)  # unit scales: the fault gives the same
    torch._scaled_mm(a, b, two, one, out_dtype=torch.bfloat16)  # <- scaled_mm


FAULTS: dict[str, tuple[str, Callable[..., torch.Tensor], Callable[[], None], str, str]] = {
    "cat flips a bit when an input is transposed": (
        "cat",
        _cat_flips_a_bit,
        _cat_program,
        "aten.cat.default",
        "transposed cat",
    ),
    "_to_copy into e4m3fn rounds through float16": (
        "_to_copy",
        _to_copy_through_float16,
        _cast_program,
        "aten._to_copy.default",
        "cast",
    ),
    "mul of e4m3fn rounds toward zero": ("mul.Tensor", _mul_truncates, _mul_program, "aten.mul.Tensor", "mul"),
    "an e4m3fn decode to float32 is one ulp off": (
        "_to_copy",
        _decode_off_by_an_ulp,
        _decode_program,
        "aten._to_copy.default",
        "decode",
    ),
    "_scaled_mm applies scale_a twice": (
        "_scaled_mm",
        _scaled_mm_scales_twice,
        _scaled_mm_program,
        "aten._scaled_mm.default",
        "scaled_mm",
    ),
}


def fault_refusal(name: str) -> str | None:
    """Why the install cannot run the fault's program (its CPU _scaled_mm refused), or None."""
    return probes.scaled_mm_refusal("tensorwise") if FAULTS[name][0] == "_scaled_mm" else None


def _violations(name: str) -> list[Record]:
    op, kernel, program, _, _ = FAULTS[name]
    with _broken(op, kernel):
        return trace(program).violations


def trace_fault_caught(name: str) -> bool:
    """Whether the trace of the fault's program has exactly one violation, on the faulty op at
    the line that called it."""
    _, _, _, op, marker = FAULTS[name]
    found = _violations(name)
    return len(found) == 1 and found[0].op == op and found[0].site == _line(marker)


@pytest.mark.parametrize("name", FAULTS)
def test_the_tracer_names_the_broken_op_and_its_line(name, skip_if_refused):
    skip_if_refused(fault_refusal(name), f"the program of {name!r}")
    _, _, program, op, marker = FAULTS[name]
    found = _violations(name)
    assert [(v.op, v.site) for v in found] == [(op, _line(marker))], "\n".join(v.report() for v in found)
    assert found[0].difference is not None, found[0].report()


def test_the_programs_trace_clean_without_the_faults():
    """The same programs, torch's own kernels: no violation (so each one above is the fault's)."""
    for name, (_, _, program, _, _) in FAULTS.items():
        if fault_refusal(name) is not None:
            continue
        found = trace(program).violations
        assert not found, f"{name}: " + "\n".join(v.report() for v in found)


def test_a_violation_reads_as_the_op_its_line_its_tensors_and_the_first_difference():
    (v,) = _violations("mul of e4m3fn rounds toward zero")
    report = v.report()
    assert report.startswith("#") and "aten.mul.Tensor [values: violation]" in report, report
    assert _line("mul") in report and "float8_e4m3fn[3] stride (1,)" in report, report
    # 1.125 x 1.75 = 1.96875, above the midpoint of 1.875 and 2: RNE gives 2 (0x40), RTZ 1.875 (0x3f)
    assert v.difference is not None and v.difference.index == (0,), report
    assert (v.difference.got, v.difference.want) == ("0x3f (1.875)", "0x40 (2.0)"), report
