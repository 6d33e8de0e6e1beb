"""A tiny FP8 mixture-of-experts layer in plain torch, run as FP8 MoE training runs it
(DeepSeek-V3, torchtitan): a bfloat16 router picks the top 2 of 4 experts per token; the tokens
are cast to float8 (E4M3, a dynamic tensorwise scale) once, before the dispatch, and the float8
codes are dispatched to fixed-capacity expert slots (``index_select`` on the codes, as an FP8
all-to-all sends them; tokens past an expert's capacity are dropped); the slots no token filled
are zeroed on the codes (``torch.where``: a padding mask); the slots are cut into the experts'
groups (``split``); each expert's fused gate-up weight is cast once and cut in two on its float8
codes (``chunk``); three ``torch._scaled_mm`` per expert (gate, up, down, SwiGLU between) and a
plain sum back to the tokens. The routing weight is folded into the hidden activation before the
down projection (the same product: the projection is linear), so the combine is an unweighted sum
and its backward an unweighted dispatch: the output gradient is cast to E4M3 once per token and
dispatched the same way (the FP8 dispatch of this stack takes E4M3 only, as DeepEP's does), then
each expert converts its gradient codes to E5M2 (a float8 -> float8 ``.to``: the backward GEMMs
take E5M2 gradients, TransformerEngine's hybrid recipe). Two SGD steps.

What the CPU refuses on float8 (torch 2.9.1, 2.13 and 2.14.1: ``gather``, ``masked_fill``,
``scatter``, ``index_copy``, ``index_fill``, ``take``: not implemented for Float8_e4m3fn; 2.9.1 also
``x[index]``) the program does the way that runs on each: ``index_select`` for ``gather``,
``torch.where`` for ``masked_fill``."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from . import tiny
from .base import Workload
from .static_custom_op import refusal

__all__ = ["WORKLOAD", "run", "route", "EXPERTS", "TOP_K", "CAPACITY", "STEPS"]

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
EXPERTS, TOP_K, CAPACITY, HIDDEN = 4, 2, 16, 64  # 32 tokens x 2 picks over 4 x 16 slots
STEPS = 2


def _cast(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``t`` in float8 with a dynamic tensorwise scale (its amax to the format's largest value), and
    the scale ``_scaled_mm`` multiplies back."""
    scale = (t.detach().abs().max().float() / torch.finfo(dtype).max).clamp(min=2.0**-60)
    return (t.float() / scale).to(dtype), scale


def _col_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` laid out column-major, as ``_scaled_mm``'s second operand must be."""
    return t.t().contiguous().t()


def route(top: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(token, pick, filled)`` per slot (``EXPERTS * CAPACITY`` slots, expert by expert) from the
    top-k expert ids ``top`` (tokens x k): the token a slot holds, which of the flattened top-k
    choices it is, and whether any token filled it. Each expert takes its tokens in token order up
    to its capacity and drops the rest (capacity-factor routing, as GShard and Switch). Integers
    only: no float8 here."""
    flat = top.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=EXPERTS)
    starts = torch.cumsum(counts, 0) - counts
    expert = flat[order]
    rank = torch.arange(flat.numel(), device=flat.device) - starts[expert]
    keep = rank < CAPACITY
    slot = expert[keep] * CAPACITY + rank[keep]
    token = torch.zeros(EXPERTS * CAPACITY, dtype=torch.long, device=flat.device)
    pick = torch.zeros_like(token)
    filled = torch.zeros(EXPERTS * CAPACITY, dtype=torch.bool, device=flat.device)
    token[slot], pick[slot], filled[slot] = order[keep] // TOP_K, order[keep], True
    return token, pick, filled


def _dispatch(codes: torch.Tensor, token: torch.Tensor, filled: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each slot's row of float8 ``codes`` (the FP8 dispatch), an empty slot's zeroed, cut into
    the experts' groups."""
    slots = codes.index_select(0, token)
    slots = torch.where(filled[:, None], slots, torch.zeros((), dtype=codes.dtype, device=codes.device))
    return slots.split([CAPACITY] * EXPERTS)


class _Fp8Experts(torch.autograd.Function):
    """``(x, gate, w13, w2, token, filled) -> out``: the experts' SwiGLU in FP8 over the slots,
    summed back to the tokens (``gate``: each slot's routing weight, 0 for an empty slot)."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        gate: torch.Tensor,
        w13: torch.Tensor,
        w2: torch.Tensor,
        token: torch.Tensor,
        filled: torch.Tensor,
    ) -> torch.Tensor:
        x_f8, x_s = _cast(x, E4M3)  # once per token, before the dispatch
        groups = _dispatch(x_f8, token, filled)
        saved: list[tuple] = []
        ys = []
        for e, x_e in enumerate(groups):
            w13_f8, w13_s = _cast(w13[e], E4M3)
            w1_f8, w3_f8 = w13_f8.chunk(2)  # the fused gate-up weight, cut on its codes
            h1 = torch._scaled_mm(x_e, w1_f8.t(), scale_a=x_s, scale_b=w13_s, out_dtype=torch.float32)
            h3 = torch._scaled_mm(x_e, w3_f8.t(), scale_a=x_s, scale_b=w13_s, out_dtype=torch.float32)
            g_e = gate[e * CAPACITY : (e + 1) * CAPACITY, None].float()
            act = F.silu(h1) * h3
            a_f8, a_s = _cast(act * g_e, E4M3)  # (the routing weight folded in before the down projection)
            w2_f8, w2_s = _cast(w2[e], E4M3)
            ys.append(torch._scaled_mm(a_f8, w2_f8.t(), scale_a=a_s, scale_b=w2_s, out_dtype=torch.float32))
            saved.append((x_e, x_s, h1, h3, act, g_e, a_f8, a_s, w2_f8, w2_s))
        out = torch.zeros(x.shape[0], w2.shape[1], device=x.device).index_add_(0, token, torch.cat(ys))
        # (kept on ctx, per expert: nothing reruns this forward, as activation checkpointing would)
        ctx.saved, ctx.token, ctx.filled, ctx.dtypes = saved, token, filled, (gate.dtype, w13.dtype, w2.dtype)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        # the combine's backward is a dispatch: the output gradient goes to the slots as the tokens did
        g_f8, g_s = _cast(grad, E4M3)
        groups = _dispatch(g_f8, ctx.token, ctx.filled)
        grad_gate, grad_w13, grad_w2 = [], [], []
        for g_e4m3, (x_e, x_s, h1, h3, act, g_e, a_f8, a_s, w2_f8, w2_s) in zip(groups, ctx.saved):
            dy = g_e4m3.to(E5M2)  # the backward GEMMs take E5M2 gradients
            grad_w2.append(
                torch._scaled_mm(
                    dy.t().contiguous(), _col_major(a_f8), scale_a=g_s, scale_b=a_s, out_dtype=torch.float32
                )
            )
            d_scaled = torch._scaled_mm(dy, _col_major(w2_f8), scale_a=g_s, scale_b=w2_s, out_dtype=torch.float32)
            grad_gate.append((d_scaled * act).sum(1))
            d_act = d_scaled * g_e
            sig = torch.sigmoid(h1)
            d13 = torch.cat([d_act * h3 * sig * (1 + h1 * (1 - sig)), d_act * h1 * sig], dim=1)
            d13_f8, d13_s = _cast(d13, E5M2)
            grad_w13.append(
                torch._scaled_mm(
                    d13_f8.t().contiguous(), _col_major(x_e), scale_a=d13_s, scale_b=x_s, out_dtype=torch.float32
                )
            )
        gate_dtype, w13_dtype, w2_dtype = ctx.dtypes
        return (
            None,
            torch.cat(grad_gate).to(gate_dtype),
            torch.stack(grad_w13).to(w13_dtype),
            torch.stack(grad_w2).to(w2_dtype),
            None,
            None,
        )


class TinyFp8MoE(torch.nn.Module):
    """A router and ``EXPERTS`` SwiGLU experts (64 -> 64 -> 32), weights drawn as ``tiny.mlp``
    draws its: float32 from a seeded generator, uniform in +-1/sqrt(fan_in), then bfloat16."""

    def __init__(self, dims: tuple[int, int] = (64, 32)) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(tiny.SEED)

        def draw(*shape: int) -> torch.nn.Parameter:
            bound = shape[-1] ** -0.5
            return torch.nn.Parameter(((torch.rand(*shape, generator=gen) * 2 - 1) * bound).to(torch.bfloat16))

        d_in, d_out = dims
        self.router = draw(EXPERTS, d_in)
        self.w13 = draw(EXPERTS, 2 * HIDDEN, d_in)
        self.w2 = draw(EXPERTS, d_out, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = (x @ self.router.t()).float().softmax(-1)
        weights, top = probs.topk(TOP_K, dim=-1)
        token, pick, filled = route(top)
        gate = weights.reshape(-1)[pick] * filled
        return _Fp8Experts.apply(x, gate, self.w13, self.w2, token, filled)


def run() -> list[float]:
    """Two SGD steps of the layer; the losses."""
    torch.manual_seed(tiny.SEED)
    model = TinyFp8MoE().to(tiny.device())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        x, target = tiny.batch(step)
        loss = (model(x) - target).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


_PER_EXPERT_STEP = EXPERTS * STEPS
WORKLOAD = Workload(
    name="moe_dispatch",
    what=(
        "a tiny FP8 MoE layer in plain torch: tokens cast once and dispatched as float8 codes (index_select), "
        "empty slots masked (where), groups split, a fused gate-up float8 weight chunked, E4M3 -> E5M2 gradients"
    ),
    module=__name__,
    run=run,
    refusal=refusal,
    expects={
        # per step: the tokens and the output gradient; per expert and step: w13, the activation,
        # w2, the gate-up gradient, and the dispatched gradient codes E4M3 -> E5M2
        ("aten._to_copy.default", "cast"): 2 * STEPS + 5 * _PER_EXPERT_STEP,
        ("aten._scaled_mm.default", "scaled_mm"): 6 * _PER_EXPERT_STEP,
        ("aten.index_select.default", "movement"): 2 * STEPS,  # the dispatch of the tokens, of the gradient
        ("aten.where.self", "movement"): 2 * STEPS,  # the empty slots zeroed
        ("aten.split_with_sizes.default", "movement"): 2 * STEPS,  # the slots cut into the experts' groups
        ("aten.split.Tensor", "movement"): _PER_EXPERT_STEP,  # each fused gate-up weight chunked
    },
    torchao=False,
)
