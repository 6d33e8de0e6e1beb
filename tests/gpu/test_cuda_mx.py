"""torchao's MX cast kernels on the GPU (Triton dim0 and dim1, where this torchao has them)
against its reference ``to_mx`` and fp8ref, with FLOOR and RCEIL passed explicitly (their
defaults differ from to_mx's and are pinned in the profile) and on shapes that do not divide
the kernels' tiles. Both kinds of bug shipped: a kernel that ignored the mode, and one that
mishandled a ragged tail."""

import pytest
import torch

from fp8ref.harness import torchao_compat as ao
from fp8ref.harness.refusals import attempt
from fp8ref.reference.formats import E4M3FN
from fp8ref.reference.quantize import quantize
from fp8ref.reference.scaling import mx

pytestmark = [pytest.mark.sm(100, "MX cast kernels"), pytest.mark.needs("torchao")]

# (rows, cols): tile-aligned, then rows and columns that are not multiples of the kernels'
# 128-row / 64-column tiles (still multiples of the 32-element MX block)
SHAPES = [(256, 256), (160, 256), (256, 96), (4128, 288)]


def _kernel(name: str, gpu_device: str, skip_unless):
    from torchao.prototype.mx_formats import kernels

    fn = getattr(kernels, name, None)
    skip_unless(None if fn is not None else f"missing: torchao has no {name}", f"torchao's {name}")
    probe = torch.ones(128, 128, dtype=torch.bfloat16, device=gpu_device)
    ok, answer = attempt(lambda: fn(probe, 32, scaling_mode="floor"))
    skip_unless(None if ok else answer, f"torchao's {name} on {gpu_device}")
    return fn


def _inputs(rows: int, cols: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rows * 7 + cols)
    blocks = torch.exp2(torch.randint(-20, 20, (rows, cols // 32), generator=gen).float())
    return (torch.randn(rows, cols, generator=gen) * blocks.repeat_interleave(32, dim=1)).to(torch.bfloat16)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("kernel", ["triton_to_mxfp8_dim0", "triton_to_mxfp8_dim1"])
def test_mx_cast_kernel_matches_to_mx_and_fp8ref(kernel, mode, shape, gpu_device, skip_unless):
    fn = _kernel(kernel, gpu_device, skip_unless)
    x = _inputs(*shape)
    ok, result = attempt(lambda: fn(x.to(gpu_device), 32, scaling_mode=mode))
    if not ok and shape != SHAPES[0]:
        skip_unless(result, f"torchao's {kernel} on a {shape[0]}x{shape[1]} input")  # a ragged shape it refuses
    assert ok, f"{kernel} refused the tile-aligned shape: {result}"
    data, scale = result
    # dim0 scales along rows (blocks of 32 in a row); dim1 along columns, returned column-major
    ref_x = x if kernel.endswith("dim0") else x.t().contiguous()
    want_scale, want_data = ao.to_mx(ref_x, E4M3FN, 32, mode)
    q = quantize(ref_x.float(), E4M3FN, mx(32, mode))
    got_data = data.view(torch.uint8).cpu()
    got_data = got_data if kernel.endswith("dim0") else got_data.t()
    got_scale = scale.view(torch.uint8).cpu().reshape(want_scale.shape)
    assert torch.equal(got_scale, want_scale), f"{kernel} {mode}: scales differ from to_mx"
    assert torch.equal(got_data.reshape(want_data.shape), want_data), f"{kernel} {mode}: elements differ from to_mx"
    assert torch.equal(want_scale, q.scale_e8m0), f"to_mx {mode}: scales differ from fp8ref"
