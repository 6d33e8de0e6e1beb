"""torchao's MX cast kernels on the GPU (Triton dim0 and dim1, where this torchao has them)
against its reference ``to_mx`` and fp8ref, with FLOOR and RCEIL passed explicitly (their
defaults differ from to_mx's and are pinned in the profile) and on shapes that do not divide
the kernels' tiles. Both kinds of bug shipped: a kernel that ignored the mode, and one that
mishandled a ragged tail."""

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch

from fp8ref.harness.ao import mx_kernels as mkc
from fp8ref.harness.stack.refusals import attempt

pytestmark = [pytest.mark.sm(100, "MX cast kernels"), pytest.mark.needs("torchao")]

# (rows, cols) each kernel accepts in torchao 0.18: dim0 takes any rows and columns in whole MX
# blocks of 32 (its grid covers ragged tails); dim1 asserts multiples of 128 for both. Each list
# starts tile-aligned, then puts tails where the kernel's tiles do not divide the shape.
SHAPES = {
    "triton_to_mxfp8_dim0": [(256, 256), (160, 256), (256, 96), (4128, 288)],
    "triton_to_mxfp8_dim1": [(256, 256), (128, 384), (384, 128), (4224, 640)],
}
# a shape the kernel does not take: it must refuse it cleanly (an error raised inside torchao),
# never write a wrong answer or fault the device
REFUSED = {"triton_to_mxfp8_dim1": (160, 256)}
CASES = [(kernel, shape) for kernel, shapes in SHAPES.items() for shape in shapes]


@functools.cache
def _kernel_refusal(name: str, device: str) -> str | None:
    """Does this torchao have the cast kernel ``name``, and does it cast on ``device``? Asked once,
    with the smallest call: a 128 x 128 block of ones, FLOOR."""
    from torchao.prototype.mx_formats import kernels

    fn = getattr(kernels, name, None)
    if fn is None:
        return f"missing: torchao has no {name}"
    probe = torch.ones(128, 128, dtype=torch.bfloat16, device=device)
    ok, answer = attempt(lambda: fn(probe, 32, scaling_mode="floor"), device)
    return None if ok else str(answer)


def _kernel(name: str, gpu_device: str, skip_if_refused: Callable[..., None]) -> Any:
    """The kernel, after the capability question (a skip on its refusal); the check then calls it unguarded."""
    from torchao.prototype.mx_formats import kernels

    skip_if_refused(_kernel_refusal(name, gpu_device), f"torchao's {name} on {gpu_device}")
    return getattr(kernels, name)


def _inputs(rows: int, cols: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rows * 7 + cols)
    blocks = torch.exp2(torch.randint(-20, 20, (rows, cols // 32), generator=gen).float())
    return (torch.randn(rows, cols, generator=gen) * blocks.repeat_interleave(32, dim=1)).to(torch.bfloat16)


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("kernel,shape", CASES, ids=[f"{k.rsplit('_', 1)[1]}-{r}x{c}" for k, (r, c) in CASES])
def test_mx_cast_kernel_matches_to_mx_and_fp8ref(kernel, shape, mode, gpu_device, skip_if_refused):
    """Every shape here is one the kernel takes: a refusal fails (only the minimal call's refusal
    skips, in ``_kernel``)."""
    fn = _kernel(kernel, gpu_device, skip_if_refused)
    x = _inputs(*shape)
    data, scale = fn(x.to(gpu_device), 32, scaling_mode=mode)
    problem = mkc.cast_kernel_problem(kernel, mode, x, data, scale)
    assert problem is None, problem


@pytest.mark.parametrize("kernel", list(REFUSED))
def test_mx_cast_kernel_refuses_a_shape_it_does_not_take_cleanly(
    kernel, gpu_device, skip_if_refused, record_observation
):
    """A shape outside the kernel's contract is refused by torchao itself (its answer is
    recorded), or, by a later torchao that takes it, answered right: never a wrong answer, and
    never a device fault (which propagates as a failure from ``attempt``)."""
    fn = _kernel(kernel, gpu_device, skip_if_refused)
    shape = REFUSED[kernel]
    x = _inputs(*shape)
    xd = x.to(gpu_device)
    # the question is whether the kernel takes this shape: only its own call is asked, and what it
    # answers is checked below unguarded
    ok, result = attempt(lambda: fn(xd, 32, scaling_mode="floor"), gpu_device)
    record_observation(f"torchao {kernel} on {shape[0]}x{shape[1]}", "accepted" if ok else result)
    if ok:
        problem = mkc.cast_kernel_problem(kernel, "floor", x, *result)
        assert problem is None, problem


def _dim1_choices() -> list[str]:
    """torchao's dim1 cast kernel choices, as this install names them (none without torchao)."""
    from fp8ref.harness.ao.surface import members

    prefix = "MXFP8Dim1CastKernelChoice."
    return [m.removeprefix(prefix) for m in members() if m.startswith(prefix)]


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("choice", _dim1_choices())
def test_every_dim1_cast_kernel_choice_casts_like_the_reference(choice, mode, gpu_device, skip_if_refused):
    """Each MXFP8Dim1CastKernelChoice torchao offers (discovered, not listed: a kernel a release adds
    runs here at once), through the wrapper torchao's MX training casts with: bitwise fp8ref's MX
    cast of the transposed input. A kernel this device or install lacks skips, naming why."""
    refused, problem = mkc.check_dim1_cast_kernel(choice, gpu_device, mode)
    skip_if_refused(refused, f"torchao's {choice} dim1 MXFP8 cast on {gpu_device}")
    assert problem is None, problem
