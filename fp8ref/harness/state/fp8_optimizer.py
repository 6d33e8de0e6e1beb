"""torchao's low-bit AdamW with FP8 state (``torchao.optim.AdamWFp8``) against fp8ref: the state
kept as E4M3 codes with per-block scales (fp8ref.reference.optim_state), and the optimizer step,
which is float32 AdamW whose moment estimates are read back from that state every step. Shared by
tests/cpu/install/test_fp8_optimizer.py and tests/meta.

A bound that any two Adam runs satisfy (Adam's step size) says nothing about the FP8 state: a state
that holds zeros moves the parameter by a step of the same size. So the steps are held to the
reference trajectory itself: the state codes after every step, and the parameter within a few
float32 ulps of the reference AdamW whose moments go through fp8ref's FP8 state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from ...reference.optim_state import dequantize_state, quantize_state
from ..stack.refusals import attempt

LR, BETAS, WD, EPS = 1e-2, (0.9, 0.999), 0.01, 1e-8
ULP = 2.0**-23


def state_inputs() -> torch.Tensor:
    """A (64, 128) float32 state with rows of magnitudes 2^-30 .. 2^30 and one all-zero block."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 128, generator=gen) * torch.exp2(torch.randint(-30, 30, (64, 1), generator=gen).float())
    x[2:4] = 0.0  # rows 2 and 3: one whole block of 256
    return x


def check_state_quantization(keep: Callable[[torch.Tensor], Any]) -> str | None:
    """``keep(x)`` returns an FP8 state holding ``x`` (codes, scale, dequantize()): its codes,
    scales and dequantized values bitwise as fp8ref's."""
    x = state_inputs()
    state = keep(x)
    codes, scale = quantize_state(x, state.block_size)
    got_codes, got_scale = state.codes.view(torch.uint8).cpu(), state.scale.cpu()  # (a state on any device)
    if not torch.equal(got_codes, codes):
        return f"{int((got_codes != codes).sum())} state codes differ from E4M3(x / (amax / 448))"
    if not torch.equal(got_scale, scale):
        return f"{int((got_scale != scale).sum())} block scales differ from amax / 448"
    if not torch.equal(state.dequantize().cpu(), dequantize_state(codes, scale)):
        return "the state reads back unlike value(code) * scale"
    return None


def reference_steps(p0: torch.Tensor, grads: list[torch.Tensor], block_size: int) -> list[dict[str, torch.Tensor]]:
    """AdamW in float32 (torchao's order of operations) whose two moments are stored through
    fp8ref's FP8 state between steps; after each step the parameter and the stored moments."""
    p = p0.clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    out = []
    for step, g in enumerate(grads, start=1):
        p = p - LR * WD * p
        m32, v32 = m.lerp(g, 1 - BETAS[0]), v.lerp(g.square(), 1 - BETAS[1])
        bc1, bc2 = 1 - BETAS[0] ** step, torch.tensor(1 - BETAS[1] ** step)
        p = p - LR * (m32 / bc1) / (v32.sqrt() / bc2.sqrt() + EPS)
        mq, vq = quantize_state(m32, block_size), quantize_state(v32, block_size)
        m, v = dequantize_state(*mq), dequantize_state(*vq)
        out.append({"p": p, "m_codes": mq[0], "m_scale": mq[1], "v_codes": vq[0], "v_scale": vq[1]})
    return out


def step_inputs(steps: int = 3) -> tuple[torch.Tensor, list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return torch.randn(64, 128, generator=gen), [torch.randn(64, 128, generator=gen) for _ in range(steps)]


def check_steps(make_optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]) -> str | None:
    """A few steps of the optimizer against ``reference_steps``. Its step is compiled, and a
    compiled division may become a multiplication by a reciprocal, so: the state codes equal,
    each block scale within 4 float32 ulps, the parameter within a few ulps per step of the
    values the fused update computes (the tolerance below says which)."""
    p0, grads = step_inputs()
    p = torch.nn.Parameter(p0.clone())
    opt = make_optimizer([p])
    ref = reference_steps(p0, grads, getattr(opt, "block_size", 256))
    for i, (g, want) in enumerate(zip(grads, ref), start=1):
        p.grad = g.clone()
        opt.step()
        st = opt.state[p]
        for name, key in (("exp_avg", "m"), ("exp_avg_sq", "v")):
            codes = st[name].codes.view(torch.uint8)
            if not torch.equal(codes, want[f"{key}_codes"]):
                return f"step {i}: {int((codes != want[f'{key}_codes']).sum())} {name} codes differ from the reference"
            rel = ((st[name].scale - want[f"{key}_scale"]).abs() / want[f"{key}_scale"]).max().item()
            if rel > 4 * ULP:  # amax of a reordered lerp (2 ulps), / 448 as * (1 / 448) (1.5)
                return f"step {i}: {name} block scales {rel / ULP:.1f} ulps from amax / 448"
        # per step: 2 ulps of the parameter (decay and update each rounded), 16 of the largest
        # update (its ~8 float32 operations, each division possibly a reciprocal product)
        tol = i * ULP * (2 * (p0.abs() + _largest_move(i)) + 16 * _largest_move(1) / 2)
        err = ((p.detach() - want["p"]).abs() / tol).max().item()
        if err > 1:
            return f"step {i}: the parameter is {err:.2f} times its tolerance from the reference"
    return None


def _largest_move(steps: int) -> float:
    """How far ``steps`` steps of two Adam runs from one point can leave them apart (a magnitude
    for the tolerance above, never a check by itself). Kingma & Ba (2015), section 2.1: one Adam
    step moves a coordinate by at most lr * (1 - b1) / sqrt(1 - b2) when 1 - b1 > sqrt(1 - b2),
    else lr; each step also shrunk by weight decay; two runs stay within twice the sum."""
    b1, b2 = BETAS
    per = LR * max(1.0, (1 - b1) / (1 - b2) ** 0.5)
    return 2 * steps * per


def float32_adamw_gap(make_optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]) -> float:
    """max |p_fp8 - p_f32| after the ``step_inputs`` steps of the optimizer and of torch's float32
    AdamW: what the FP8 state costs, an observation (any Adam pair stays within Adam's step size of
    each other, so no bound on it can tell a right FP8 state from a wrong one)."""
    p0, grads = step_inputs()
    runs = []
    for make in (make_optimizer, lambda ps: torch.optim.AdamW(ps, LR, BETAS, EPS, WD)):
        p = torch.nn.Parameter(p0.clone())
        opt = make([p])
        for g in grads:
            p.grad = g.clone()
            opt.step()
        runs.append(p.detach())
    return (runs[0] - runs[1]).abs().max().item()


def adamw_fp8(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """torchao's AdamWFp8 with the reference's hyperparameters."""
    from torchao.optim import AdamWFp8

    return AdamWFp8(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)


@functools.cache
def adamw_fp8_step_refusal() -> str | None:
    """Does torchao's AdamWFp8 step (compiled by torchao with torch.compile) run here? Asked with
    one step of the smallest parameter that gets FP8 state (torchao quantizes a state of 4096
    values or more, ``torchao/optim/adam.py``, ``_new_buffer``): None, or the install's refusal."""

    def one_step() -> None:
        p = torch.nn.Parameter(torch.ones(16, 256))
        p.grad = torch.ones(16, 256)
        adamw_fp8([p]).step()

    ok, result = attempt(one_step)
    return None if ok else str(result)
