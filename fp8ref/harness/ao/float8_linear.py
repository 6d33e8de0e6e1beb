"""torchao Float8Linear checks for the CPU and CUDA (tests/cpu/install/test_torchao_linear.py, whose
tests of the same body are parametrized by device, and tests/gpu/test_torchao_linear.py): plain
functions of a recipe and a device that return None when torchao conforms, else a line that says
what differs; the thin tests skip (naming the versions) where the install refuses the recipe.
``gemm_operand_mismatches`` holds Float8Linear's three GEMMs, one by one, to the recipe's casts.
The helpers ``torchao_convert`` and ``fwd_bwd`` serve the other Float8Linear tests of both
modules too.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from ...reference.emulate import Fp8Linear
from ...reference.recipes import RECIPES
from ..gemm.documented_accumulator import accumulator, gemm_accumulation
from ..gemm.gemm_probes import accumulation_bound, half_ulp
from .torchao_compat import float8_kernel_operands, torchao_float8_linear

U_BF16 = half_ulp(torch.bfloat16)  # 2^-8, relative


def _problem(
    device: str, d_in: int = 256, d_out: int = 128, tokens: int = 64, seed: int = 0
) -> tuple[torch.nn.Linear, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    lin = torch.nn.Linear(d_in, d_out, bias=False).to(torch.bfloat16).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(tokens, d_in, generator=gen).to(torch.bfloat16).to(device)
    g = torch.randn(tokens, d_out, generator=gen).to(torch.bfloat16).to(device)
    return lin, x, g


def torchao_convert(lin: torch.nn.Linear, recipe: str, emulate: bool = False) -> Any:
    """A copy of ``lin`` in a Sequential, converted by torchao's float8 training for ``recipe``."""
    return torchao_float8_linear(recipe, emulate)(lin)


def fwd_bwd(module: Any, x: torch.Tensor, g: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """Forward ``x`` and backward ``g`` through a Linear (bare, in a Sequential, or compiled):
    output, grad_input, grad_weight and grad_bias (None without a bias)."""
    xi = x.clone().requires_grad_()
    y = module(xi)
    y.backward(g)
    inner = getattr(module, "_orig_mod", module)  # unwrap torch.compile
    lin = inner[0] if isinstance(inner, torch.nn.Sequential) else inner
    return {
        "output": y.detach(),
        "grad_input": xi.grad,
        "grad_weight": lin.weight.grad,
        "grad_bias": None if lin.bias is None else lin.bias.grad,
    }


def check_compiled_matches_eager(recipe: str, device: str) -> str | None:
    """Guards: a codegen change that makes compiled float8 training produce NaN/Inf or other
    numbers while eager is fine. Compiled and eager cast the same values (the casts are compared
    bitwise elsewhere); inductor may fuse and reorder the GEMMs' surroundings, so each output is
    held to |compiled - eager| <= 2u|eager| + 2 b m, with u half a bfloat16 ulp, m the magnitude
    sum of the GEMM's high-precision operands (x 1.1 for their FP8 rounding) and b the accumulation
    bound of an FP8 GEMM on this device (``gemm_probes.accumulation_bound`` of the documented
    accumulator, ``documented_accumulator.accumulator``: float32 on the CPU, on a GPU the least
    documented width within a K block and no promotion, never the device's own probe): the two sides may
    run different kernels, summing in different orders. Compile under the ``fresh_dynamo`` fixture."""
    lin, x, g = _problem(device)
    m = torchao_convert(lin, recipe)
    eager = fwd_bwd(m, x, g)
    compiled = fwd_bwd(torch.compile(copy.deepcopy(m), dynamic=False), x, g)
    x2, g2, w = x.double().cpu(), g.double().cpu(), lin.weight.double().cpu()
    mags = {"output": x2.abs() @ w.abs().t(), "grad_input": g2.abs() @ w.abs(), "grad_weight": g2.abs().t() @ x2.abs()}
    ks = {"output": x2.shape[1], "grad_input": g2.shape[1], "grad_weight": x2.shape[0]}
    within, interval = accumulator(device)
    for name, mag in mags.items():
        c, e = _tensor(compiled[name]).double().cpu(), _tensor(eager[name]).double().cpu()
        if not bool(torch.isfinite(c).all()):
            return f"compiled {recipe} {name} on {device} is not finite"
        bound = 2 * U_BF16 * e.abs() + 2 * accumulation_bound(ks[name], within, interval) * 1.1 * mag
        excess = (c - e).abs() - bound
        if not bool((excess <= 0).all()):
            return (
                f"compiled {recipe} {name} on {device}: {int((excess > 0).sum())} elements outside the bound, "
                f"max excess {excess.max().item():.3e}"
            )
    return None


def check_weight_cast_follows_the_weight(recipe: str, device: str) -> str | None:
    """Guards: a cached FP8 weight (or its scale) that is not refreshed after the optimizer moves
    the weight: silent drift. After each SGD step, torchao's forward must equal fp8ref's emulated
    linear built from the *current* weight, and the step must have changed the weight's amax. With
    emulate=True both compute a float32 product of the same FP8 values: bitwise on the CPU; on a
    GPU the two matmuls may sum in other orders, so within 2u|y| + 2 b m (b as above), far
    below what a stale weight scale would change."""
    lin, x, g = _problem(device, seed=5)
    m = torchao_convert(lin, recipe, emulate=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    acc = accumulation_bound(x.shape[1], *accumulator(device))
    amaxes = []
    for step in range(3):
        weight = m[0].weight
        amaxes.append(weight.detach().abs().max().item())
        ours = Fp8Linear.from_linear(copy.deepcopy(lin).requires_grad_(False), recipe)
        with torch.no_grad():
            ours.weight.copy_(weight)
            theirs_y, ours_y = m(x), ours(x)
        if device == "cpu":
            ok = torch.equal(theirs_y, ours_y)
        else:
            mag = 1.1 * (x.double().abs() @ weight.detach().double().abs().t())
            bound = 2 * U_BF16 * ours_y.double().abs() + 2 * acc * mag
            ok = bool(((theirs_y.double() - ours_y.double()).abs() <= bound).all())
        if not ok:
            return (
                f"{recipe} on {device}, after {step} optimizer steps: torchao's output differs from the "
                f"emulation with the current weight (max |diff| {(theirs_y - ours_y).abs().max().item():.3e})"
            )
        opt.zero_grad(set_to_none=True)
        m(x).backward(g * 64)
        opt.step()
    if len(set(amaxes)) != len(amaxes):
        return f"the steps did not move the weight's amax: {amaxes}"
    return None


def _tensor(t: torch.Tensor | None) -> torch.Tensor:
    assert t is not None, "a gradient that should exist is None"
    return t


def _converted(lin: torch.nn.Linear, recipe: str, **options: Any) -> Any:
    """torchao's conversion of a copy of ``lin`` for ``recipe`` with config fields set."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), **options)
    return convert_to_float8_training(torch.nn.Sequential(copy.deepcopy(lin)), config=cfg)


def check_pad_inner_dim(recipe: str, device: str, pad: Any = None) -> str | None:
    """Guards ``pad_inner_dim=True``, which torchao needs for a contraction dim that is not a
    multiple of 16 (torch._scaled_mm's rule on CUDA): each float8 GEMM's operands must reach the
    kernel with that dim padded to the next multiple of 16 with the zero code and their own codes
    unchanged before it, and the layer's output and gradients must be the reference's (fp8ref's
    Fp8Linear, no padding: zeros add nothing) within the bound of a GEMM through _scaled_mm,
    |torchao - ref| <= 2u|y| + u m + 2 b m (u: half a bfloat16 ulp, m: the GEMM's magnitude sum x
    1.1, b: ``gemm_accumulation`` of its K on this device, the accumulation bound the other FP8
    layer checks use: float32's on the CPU, at least the bound of the least documented FP8
    accumulator, fast accumulation included, on a GPU: ``documented_accumulator``). K = 200, N = 72 and 40
    tokens make every GEMM's contraction ragged.
    ``pad``: a stand-in for torchao's padding function (tests/meta)."""
    lin, x, g = _problem(device, d_in=200, d_out=72, tokens=40, seed=3)
    m = _converted(lin, recipe, pad_inner_dim=True, emulate=False)
    from torchao.float8 import float8_ops

    real_pad = float8_ops.pad_tensor_for_matmul
    float8_ops.pad_tensor_for_matmul = pad or real_pad
    try:
        with float8_kernel_operands() as seen:
            theirs = fwd_bwd(m, x, g)
    finally:
        float8_ops.pad_tensor_for_matmul = real_pad
    table = RECIPES[recipe].describe()  # (a GEMM in high precision never reaches the float8 kernel)
    fp8_gemms = sum(table[f"{gemm}.a"] != "high-precision" for gemm in ("output", "grad_input", "grad_weight"))
    if len(seen) != fp8_gemms:
        return f"{recipe}: {len(seen)} float8 GEMMs reached the kernel, the recipe has {fp8_gemms}"
    for i, op in enumerate(seen):
        for side, k_dim in (("a", 1), ("b", 0)):
            got, before = op[side], op[f"{side}_in"]
            k, padded = before.shape[k_dim], got.shape[k_dim]
            if padded % 16 or padded < k or padded - k >= 16:
                return f"{recipe} GEMM {i} operand {side}: contraction {k} reached the kernel as {padded}"
            if not torch.equal(got.narrow(k_dim, 0, k), before):
                return f"{recipe} GEMM {i} operand {side}: its codes changed under the padding"
            tail = got.narrow(k_dim, k, padded - k)
            if bool((tail != 0).any()):
                codes = sorted(set(tail.unique().tolist()))
                return f"{recipe} GEMM {i} operand {side}: padded with codes {codes}, not 0x00"
    ours = fwd_bwd(Fp8Linear.from_linear(copy.deepcopy(lin), recipe), x, g)
    x2, g2, w = x.double(), g.double(), lin.weight.double()
    mags = {"output": x2.abs() @ w.abs().t(), "grad_input": g2.abs() @ w.abs(), "grad_weight": g2.abs().t() @ x2.abs()}
    ks = {"output": 200, "grad_input": 72, "grad_weight": 40}
    for name, mag in mags.items():
        ref, got, mm = _tensor(ours[name]).double(), _tensor(theirs[name]).double(), 1.1 * mag.cpu()
        bound = 2 * U_BF16 * ref.abs().cpu() + U_BF16 * mm + 2 * gemm_accumulation(ks[name], device) * mm
        excess = (got.cpu() - ref.cpu()).abs() - bound
        if bool((excess > 0).any()):
            return f"{recipe} {name} with pad_inner_dim: {int((excess > 0).sum())} elements outside the bound"
    return None


def check_force_recompute_is_inert(recipe: str, device: str) -> str | None:
    """Guards ``force_recompute_fp8_weight_in_bwd``, which torchao 0.17-0.18 document as deprecated
    and without effect: a converted layer with it on must train as one with it off, bitwise (the
    same casts and GEMMs), forward and backward over three SGD steps. A release that gives it an
    effect (a weight cast recomputed in the backward from another scale) fails here by name."""
    lin, x, g = _problem(device, seed=7)
    runs = []
    for flag in (False, True):
        m = _converted(lin, recipe, force_recompute_fp8_weight_in_bwd=flag, emulate=True)
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        steps = []
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            steps.append(fwd_bwd(m, x, g * 64))
            opt.step()
        runs.append(steps)
    for step, (off, on) in enumerate(zip(*runs)):
        for name in ("output", "grad_input", "grad_weight"):
            if not torch.equal(_tensor(off[name]), _tensor(on[name])):
                return f"{recipe}, step {step}: {name} differs with force_recompute_fp8_weight_in_bwd=True"
    return None


def gemm_operand_mismatches(
    recipe: Any, seen: list[dict], x: torch.Tensor, w: torch.Tensor, grad: torch.Tensor
) -> list[str]:
    """Each float8 GEMM torchao ran (``torchao_compat.float8_gemm_operands``) for a Linear with
    input ``x`` (M, K), weight ``w`` (N, K) and output gradient ``grad`` (M, N), against the
    recipe's cast of that GEMM's operands (``emulate.cast_operand``, contraction-last), bitwise;
    and every float8 GEMM the recipe has must have run (a high-precision one must not)."""
    from ...reference.emulate import cast_operand

    operands = {"output": (x, w), "grad_input": (grad, w.t()), "grad_weight": (grad.t(), x.t())}
    ran = {s["gemm"]: s for s in seen}
    bad = []
    for gemm, (a_hp, b_hp) in operands.items():
        cast = getattr(recipe, gemm)
        if cast.a.fmt is None:
            if gemm in ran:
                bad.append(f"{gemm}: ran in float8, the recipe keeps it in high precision")
            continue
        if gemm not in ran:
            bad.append(f"{gemm}: no float8 GEMM ran")
            continue
        got = ran[gemm]
        for side, value, op, want_hp in (("A", got["a"], cast.a, a_hp), ("B", got["b"].t(), cast.b, b_hp)):
            want = cast_operand(want_hp.contiguous(), op)
            if value.shape != want.shape or not torch.equal(value, want):
                how = "shape" if value.shape != want.shape else f"{int((value != want).sum())} values"
                bad.append(f"{gemm} operand {side} ({op.describe()}): {how} differ from the recipe's cast")
    return bad
