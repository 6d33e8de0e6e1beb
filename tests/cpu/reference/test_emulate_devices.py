"""Where the emulated reference multiplies (fp8ref/reference/emulate.py): in float32 on the CPU, in
float64 on the CPU for operands on another device, and in the install's float32 order with TF32
off inside ``install_float32_order``; the matmul setting it pins comes back as it was."""

import pytest
import torch

from fp8ref.reference import emulate


def test_the_device_path_multiplies_in_float64_and_rounds_once():
    """1 + 2^-25 - 1: a float32 sum that adds 2^-25 to 1 first loses it; the device path keeps it."""
    a = torch.tensor([[1.0, 2.0**-25, -1.0]])
    b = torch.ones(3, 1)
    got = emulate._float64_on_cpu(a, b)
    assert got.dtype == torch.float32 and got.device == a.device
    assert got.item() == 2.0**-25, f"[1, 2^-25, -1] . [1, 1, 1]: expected 2^-25, got {got.item()!r}"
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 256, generator=gen), torch.randn(256, 48, generator=gen)
    assert torch.equal(emulate._float64_on_cpu(x, w), (x.double() @ w.double()).float())


def test_cpu_operands_keep_the_cpus_float32_gemm():
    """The CPU checks compare the reference with torchao's emulate=True bit for bit: on the CPU the
    reference's GEMM is torch's float32 matmul, inside install_float32_order or not."""
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(64, 256, generator=gen), torch.randn(256, 48, generator=gen)
    assert torch.equal(emulate._gemm(x, w), x @ w)
    with emulate.install_float32_order():
        assert torch.equal(emulate._gemm(x, w), x @ w)


@pytest.mark.parametrize("before", ["high", "medium", "highest"])
def test_full_float32_matmuls_pins_highest_and_restores_the_setting(before):
    outside = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(before)
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with emulate.install_float32_order():
                assert torch.get_float32_matmul_precision() == "highest"
                assert emulate._INSTALL_ORDER.get() is True
                raise RuntimeError("inside")
        assert torch.get_float32_matmul_precision() == before, "the matmul precision was not restored"
        assert emulate._INSTALL_ORDER.get() is False
    finally:
        torch.set_float32_matmul_precision(outside)
