"""torch's casts on the GPU against the codec: all 65,536 bfloat16 and float16 patterns into
each format, and all 256 codes decoded. The CUDA kernels are separate code from the CPU ones,
so their overflow/NaN behaviour is observed on its own (and may differ from CPU).

Without a GPU these skip; with --fp8-dry-run they run on the CPU device so CI keeps them alive.
"""

import pytest
import torch

from fp8ref.harness.casts.cast_inputs import all_16bit_inputs
from fp8ref.harness.casts.conformance import check_cast
from fp8ref.harness.casts.implementations import torch_cast
from fp8ref.harness.stack import probes
from fp8ref.reference.codec import decode
from tests.common.params import TORCH_FORMATS


@pytest.mark.exhaustive
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_device_cast_of_all_16bit_patterns_matches_the_codec(
    fmt, dtype, gpu_device, record_cast_report, skip_if_refused
):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"casts to {fmt.name}")
    impl = torch_cast(fmt, gpu_device)
    report = check_cast(impl, all_16bit_inputs(dtype), fmt, f"all {dtype}".replace("torch.", ""))
    record_cast_report(report)
    assert report.ok, report.failure_message()


@pytest.mark.exhaustive
@pytest.mark.parametrize("fmt", TORCH_FORMATS)
def test_device_decode_of_all_256_codes_matches_the_codec(fmt, gpu_device, skip_if_refused):
    skip_if_refused(probes.torch_dtype_refusal(fmt), f"decodes {fmt.name}")
    dtype = fmt.torch_dtype()
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = codes.to(gpu_device).view(dtype).float().cpu()
    want = decode(codes, fmt)
    same = ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))
    bad = (~same).nonzero().flatten().tolist()
    assert not bad, f"torch {torch.__version__} on {gpu_device} decodes {fmt.name} differently: " + ", ".join(
        f"0x{c:02x}: expected {want[c].item()!r}, got {got[c].item()!r}" for c in bad[:8]
    )
