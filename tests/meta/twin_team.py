"""A team's own FP8 MLP, as a team writes it (tests/meta/test_twin_faults.py): current scaling
(or TransformerEngine-style delayed scaling) into E4M3 for the input and the weight and E5M2 for
the output gradient, a cached float8 weight, the transposed weight packed for the backward GEMM.
``FAULT`` plants one bug at a time; the lines that cast or multiply carry a ``# site:`` tag the
test finds them by."""

from __future__ import annotations

from typing import Any

import torch

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FAULT: str | None = None  # set by the test: one of FAULTS, or None (the mended module)
FAULTS = (
    "grad_forward_scale",
    "stale_cache",
    "packed_memory_order",
    "history_order",
    "saturate_240",
    "float16_round_trip",
    "inf_scale_at_zero",
)


def quantize(t: torch.Tensor, dtype: torch.dtype, scale: torch.Tensor | None = None) -> tuple:
    """``t`` in ``dtype`` with its current scale (or ``scale``, the value it multiplies by)."""
    fmax = torch.finfo(dtype).max
    if scale is None:
        amax = t.detach().abs().max().float()
        if FAULT != "inf_scale_at_zero":
            amax = amax.clamp(min=1e-12)
        scale = fmax / amax
    v = t.float()
    if FAULT == "float16_round_trip":
        v = v.half().float()
    lim = 240.0 if FAULT == "saturate_240" and dtype == E4M3 else fmax
    codes = (v * scale).clamp(-lim, lim).to(dtype)  # site: cast
    return codes, scale.float()


class History:
    """TransformerEngine's delayed scaling: the scale the next step casts with, from the max of
    the last 16 amaxes, this step's recorded first."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.fmax = torch.finfo(dtype).max
        self.amaxes = torch.zeros(16)
        self.scale = torch.ones(())

    def update(self, amax: torch.Tensor) -> None:
        if FAULT == "history_order":  # the scale read from the history before this amax is in it
            top = self.amaxes.max()
            self.scale = torch.where(top > 0, self.fmax / top, self.scale)
        self.amaxes = torch.roll(self.amaxes, 1)
        self.amaxes[0] = amax
        if FAULT != "history_order":
            top = self.amaxes.max()
            self.scale = torch.where(top > 0, self.fmax / top, self.scale)


class _Mm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, layer: TeamFp8Linear) -> torch.Tensor:
        x_f8, x_s = quantize(x, E4M3, layer.hist["x"].scale if layer.delayed else None)
        w_f8, w_s = layer.cached_weight()
        if layer.delayed:
            layer.hist["x"].update(x.detach().abs().max().float())
        sa, sb = 1 / x_s, 1 / w_s
        out = torch._scaled_mm(x_f8, w_f8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)  # site: mm
        wt_packed = torch.cat([w_f8.t().contiguous().reshape(-1)])  # W^T, (K, N) in memory
        ctx.save_for_backward(x_f8, wt_packed, x_s, w_s)
        ctx.layer, ctx.shape = layer, w.shape
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:
        x_f8, wt_packed, x_s, w_s = ctx.saved_tensors
        layer, (n, k) = ctx.layer, ctx.shape
        if FAULT == "grad_forward_scale":
            g_f8, g_s = quantize(g, E5M2, x_s)  # site: grad_cast_call
        else:
            g_f8, g_s = quantize(g, E5M2, layer.hist["g"].scale if layer.delayed else None)
        if layer.delayed:
            layer.hist["g"].update(g.detach().abs().max().float())
        if FAULT == "packed_memory_order":
            w_f8 = wt_packed.view(n, k)  # read back as if it were W
        else:
            w_f8 = wt_packed.view(k, n).t()
        w_cm, x_cm, f32 = w_f8.t().contiguous().t(), x_f8.t().contiguous().t(), torch.float32
        grad_x = torch._scaled_mm(g_f8, w_cm, scale_a=1 / g_s, scale_b=1 / w_s, out_dtype=f32)  # site: grad_x
        grad_w = torch._scaled_mm(
            g_f8.t().contiguous(), x_cm, scale_a=1 / g_s, scale_b=1 / x_s, out_dtype=f32
        )  # site: grad_w
        return grad_x, grad_w, None


class TeamFp8Linear(torch.nn.Module):
    """A bias-free Linear in FP8 whose float8 weight is cached until the weight changes."""

    def __init__(self, linear: torch.nn.Linear, delayed: bool = False) -> None:
        super().__init__()
        self.weight = linear.weight
        self.delayed = delayed
        self.hist = {r: History(E5M2 if r == "g" else E4M3) for r in "xwg"}
        self._key: Any = None
        self._cache: tuple | None = None

    def cached_weight(self) -> tuple:
        # the weight changes in place (optimizer.step, load_state_dict): its version says so,
        # its storage's address does not
        key = self.weight.data_ptr() if FAULT == "stale_cache" else (self.weight.data_ptr(), self.weight._version)
        if self.delayed:
            w = quantize(self.weight.detach(), E4M3, self.hist["w"].scale)
            self.hist["w"].update(self.weight.detach().abs().max().float())
            return w
        if key != self._key or self._cache is None:
            self._cache, self._key = quantize(self.weight.detach(), E4M3), key
        return self._cache

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Mm.apply(x, self.weight, self)

    def get_extra_state(self) -> Any:
        return {r: (h.amaxes.clone(), h.scale.clone()) for r, h in self.hist.items()}

    def set_extra_state(self, state: Any) -> None:
        for r, (amaxes, scale) in state.items():
            self.hist[r].amaxes, self.hist[r].scale = amaxes.clone(), scale.clone()


class TeamMlp(torch.nn.Module):
    def __init__(self, seed: int, delayed: bool = False) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        layers = []
        for fan_in, fan_out in ((32, 32), (32, 16)):
            linear = torch.nn.Linear(fan_in, fan_out, bias=False)
            with torch.no_grad():
                linear.weight.copy_((torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * fan_in**-0.5)
            layers.append(TeamFp8Linear(linear, delayed))
        self.fc1, self.act, self.fc2 = layers[0], torch.nn.ReLU(), layers[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))
