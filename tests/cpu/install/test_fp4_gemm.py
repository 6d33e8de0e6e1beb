"""The FP4 GEMM harness on CPU: cuBLAS's block-scale layout against torchao's, its argument
checks, and the FP4 GEMM check run through float64 stand-ins for torch._scaled_mm, one correct
and three with faults a kernel or a layout change could bring (so the CUDA check can fail)."""

from typing import Any

import pytest
import torch

from fp8ref.harness.gemm import fp4_gemm
from fp8ref.harness.gemm.fp4_gemm_bound import CASES, excess
from fp8ref.harness.stack import probes
from fp8ref.reference.codec import decode, unpack_fp4
from fp8ref.reference.formats import E2M1FN, E4M3FN, E8M0FNU


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("shape", [(128, 4), (256, 8), (100, 3), (300, 17), (1, 1)])
def test_to_blocked_matches_torchao(shape):
    from torchao.prototype.mx_formats.utils import to_blocked as ao_to_blocked

    s = torch.randint(0, 255, shape, generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    assert torch.equal(fp4_gemm.to_blocked(s), ao_to_blocked(s))


def test_to_blocked_is_a_permutation_of_the_padded_scales():
    s = torch.arange(256 * 8, dtype=torch.int32).reshape(256, 8)
    out = fp4_gemm.to_blocked(s)
    assert torch.equal(out.sort().values, s.flatten())
    # cuBLAS: within the first 128x4 tile, row 33 column 2 sits at (33 % 32) * 16 + (33 // 32) * 4 + 2
    assert int(out[1 * 16 + 1 * 4 + 2]) == int(s[33, 2])


def test_scaled_mm_checks_its_arguments():
    c = torch.zeros(128, 64, dtype=torch.uint8)
    s = torch.zeros(128, 2, dtype=torch.uint8)
    with pytest.raises(ValueError, match="kind"):
        fp4_gemm.scaled_mm("fp4", c, s, c, s, device="cpu")
    with pytest.raises(ValueError, match=r"\(M, K/16\)"):
        fp4_gemm.scaled_mm("nvfp4", c, s, c, s, device="cpu")
    with pytest.raises(TypeError, match="a_codes"):
        fp4_gemm.scaled_mm("mxfp4", c.float(), s, c, s, device="cpu")


def _unblock(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Invert to_blocked for a (rows, cols) scale matrix (rows % 128 == cols % 4 == 0)."""
    idx = fp4_gemm.to_blocked(torch.arange(rows * cols).reshape(rows, cols))
    out = torch.empty(rows * cols, dtype=flat.dtype)
    out[idx] = flat
    return out.reshape(rows, cols)


def _stand_in(fault: str | None) -> Any:
    """A float64 torch._scaled_mm for FP4 operands: unpack, decode, apply the block scales read
    back from cuBLAS's layout, multiply. ``fault``, one at a time: ``nibbles`` (A's two elements
    per byte read in the other order), ``scale_axis`` (B's block scales applied to the wrong
    rows), ``bf16_accumulate`` (operands and sums through bfloat16, plus a 2^-6 drift)."""

    def mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, **_):
        m, n, k = a.shape[0], b.shape[1], a.shape[1] * 2
        ca = unpack_fp4(a.view(torch.uint8))
        if fault == "nibbles":
            ca = unpack_fp4((a.view(torch.uint8) >> 4) | (a.view(torch.uint8) << 4))
        cb = unpack_fp4(b.t().contiguous().view(torch.uint8))
        e8m0 = scale_a.dtype == torch.float8_e8m0fnu
        bs = 32 if e8m0 else 16
        fmt = E8M0FNU if e8m0 else E4M3FN
        sa = decode(_unblock(scale_a.view(torch.uint8), m, k // bs), fmt).double()
        sb = decode(_unblock(scale_b.view(torch.uint8), n, k // bs), fmt).double()
        if fault == "scale_axis":
            sb = sb.flip(0)
        va = decode(ca, E2M1FN).double() * sa.repeat_interleave(bs, dim=1)
        vb = decode(cb, E2M1FN).double() * sb.repeat_interleave(bs, dim=1)
        out = va @ vb.t()
        if fault == "bf16_accumulate":
            out = (va.bfloat16().double() @ vb.t()).bfloat16().double() * (1 + 2.0**-6)
        return out.to(out_dtype)

    return mm


@pytest.mark.parametrize("kind,two_level", CASES, ids=[f"{k}{'-two' if t else ''}" for k, t in CASES])
def test_the_fp4_gemm_check_passes_a_correct_stand_in_and_catches_faults(kind, two_level, monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", _stand_in(None))
    assert excess(kind, two_level, torch.bfloat16, "cpu", 128, 256, 128) is None
    for fault in ("nibbles", "scale_axis", "bf16_accumulate"):
        monkeypatch.setattr(torch, "_scaled_mm", _stand_in(fault))
        assert excess(kind, two_level, torch.bfloat16, "cpu", 128, 256, 128) is not None, fault


def test_this_cpu_refuses_fp4_gemms_or_runs_them_correctly(skip_if_refused):
    """On an install whose CPU path takes FP4 operands (through either API), the same check holds."""
    for kind, two_level in CASES:
        skip_if_refused(probes.fp4_gemm_refusal(kind, torch.bfloat16, "cpu"), f"{kind} FP4 GEMMs on cpu")
        assert (
            excess(kind, two_level, torch.bfloat16, "cpu", api=probes.fp4_gemm_api(kind, torch.bfloat16, "cpu")) is None
        )


def test_each_fp4_kind_goes_through_the_api_the_install_accepts(monkeypatch):
    """torch runs MXFP4 through F.scaled_mm (torch._scaled_mm: ROCm only) and NVFP4 through
    either; the tests and benchmarks ask, per kind, and a refusal names every API's answer."""
    accepted = {("mxfp4", "F.scaled_mm"), ("nvfp4", "torch._scaled_mm")}

    def answer(kind, api, out_dtype=torch.bfloat16, device="cpu"):
        return None if (kind, api) in accepted else f"refused: ValueError: no {api} for {kind}"

    monkeypatch.setattr(probes, "fp4_scaled_mm_refusal", answer)
    assert probes.fp4_gemm_api("mxfp4") == "F.scaled_mm" and probes.fp4_gemm_api("nvfp4") == "torch._scaled_mm"
    assert probes.fp4_gemm_refusal("mxfp4") is None
    accepted.clear()
    assert probes.fp4_gemm_api("nvfp4") is None
    assert probes.fp4_gemm_refusal("nvfp4") == (
        "F.scaled_mm: refused: ValueError: no F.scaled_mm for nvfp4; "
        "torch._scaled_mm: refused: ValueError: no torch._scaled_mm for nvfp4"
    )


def test_fp4_scaled_mm_refuses_an_unknown_api():
    c = torch.zeros(128, 64, dtype=torch.uint8)
    s = torch.zeros(128, 2, dtype=torch.uint8)
    with pytest.raises(ValueError, match="api: expected one of"):
        fp4_gemm.scaled_mm("mxfp4", c, s, c, s, device="cpu", api="cublas")
