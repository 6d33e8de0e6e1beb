"""The module check: a team's FP8 module held to its high-precision twin through a training
lifecycle (docs/twin.md).

Each FP8 submodule whose twin is an ``nn.Linear`` (a *leaf*) is held on its own, teacher-forced:
its input, master weight and output gradient as the FP8 run had them give the twin's exact
output, input gradient and weight gradient (float64), and the FP8 leaf's must lie within the
bound ``bounds`` derives from the declared ``Recipe``. Holding the leaf, not the whole module,
keeps each bound derived (an error passed through a nonlinearity and the next layer has no
bound but a Lipschitz constant's guess) and names the submodule that departs. The master weights
are held after each optimizer step to the twin's SGD trajectory from its own exact gradients,
within the sum of the gradient bounds times the learning rates.

The lifecycle (``EVENTS``), a forward and backward held after each: the first step, an ordinary
SGD step, two accumulated backward passes, a large step (the weights' largest change four times
their largest value, so a cached FP8 weight not refreshed shows), the step after it (a delayed
scale must have caught up), ``state_dict`` saved and loaded into a fresh module, eval (forward
only, no grad), a batch of another number of rows, an all-zero batch (a padded micro-batch: amax 0).
Half of each batch's rows are signed one-hot rows, so a leaf's output holds single weight
elements to their own bound (a fault in a few elements is not averaged away over K).
"""

from __future__ import annotations

import copy
import dataclasses
import io
import math
from collections.abc import Callable

import torch

from ..claims.results import ClaimResult
from .bounds import Operand, Scaling, gemm_bound, operand_error, ratio

__all__ = ["Recipe", "ModuleCheck", "check_module", "EVENTS", "bucket"]

EVENTS = (
    "first step",
    "after an SGD step",
    "gradient accumulation (2 backward passes)",
    "after a large step",
    "the step after the large one",
    "after state_dict save and load",
    "eval (forward only)",
    "a batch of another shape",
    "an all-zero batch",
)
_SMALL, _LARGE = 2.0**-6, 4.0  # an SGD step's largest weight change, as a fraction of the largest weight


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What the module declares it casts: the input ``x`` and the weight ``w`` of the forward
    GEMM, the output gradient ``g`` of the two backward GEMMs (with ``w`` and ``x``)."""

    x: Operand = Operand("e4m3fn")
    w: Operand = Operand("e4m3fn")
    g: Operand = Operand("e5m2")

    def __post_init__(self) -> None:
        for role in ("x", "w", "g"):
            if not isinstance(getattr(self, role), Operand):
                raise TypeError(f"{role}: expected an Operand, got {getattr(self, role)!r}")

    @staticmethod
    def of(kind: str, fwd: str = "e4m3fn", grad: str = "e5m2", **scales: float) -> Recipe:
        """One scaling for all three (``dynamic``, ``delayed``; ``static`` with ``x=``, ``w=``, ``g=``
        scales, each the value the cast multiplies by)."""
        if kind == "static":
            missing = [r for r in ("x", "w", "g") if r not in scales]
            if missing:
                raise ValueError(f"scales: a static recipe needs x=, w= and g=; missing {missing}")
            return Recipe(*(Operand(f, Scaling("static", scales[r])) for r, f in zip("xwg", (fwd, fwd, grad))))
        return Recipe(Operand(fwd, Scaling(kind)), Operand(fwd, Scaling(kind)), Operand(grad, Scaling(kind)))


@dataclasses.dataclass(frozen=True)
class ModuleCheck:
    """``fp8(seed)``: the team's FP8 module (its weights from the seed); ``twin(module)``: its
    high-precision counterpart (a converter, or a factory that ignores its argument), whose
    parameters are given the FP8 module's by name; ``after_step(module)``: what the team's
    training loop does after ``optimizer.step()`` (re-quantize cached weights), if anything;
    ``output_gradient``: the size of the loss's gradient at the output (the loss is
    ``sum(out * r)``, ``r`` normal times it: a static gradient scale must fit it)."""

    name: str
    fp8: Callable[[int], torch.nn.Module]
    twin: Callable[[torch.nn.Module], torch.nn.Module]
    recipe: Recipe = Recipe()
    after_step: Callable[[torch.nn.Module], None] | None = None
    output_gradient: float = 2.0**-26
    rows: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name: expected a non-empty name, got {self.name!r}")
        for field in ("fp8", "twin"):
            if not callable(getattr(self, field)):
                raise TypeError(f"{field}: expected a callable, got {getattr(self, field)!r}")
        if self.after_step is not None and not callable(self.after_step):
            raise TypeError(f"after_step: expected a callable or None, got {self.after_step!r}")
        if not isinstance(self.recipe, Recipe):
            raise TypeError(f"recipe: expected a Recipe, got {self.recipe!r}")
        if not (isinstance(self.output_gradient, float) and self.output_gradient > 0):
            raise ValueError(f"output_gradient: expected a positive float, got {self.output_gradient!r}")
        if not (isinstance(self.rows, int) and self.rows >= 2):
            raise ValueError(f"rows: expected an int >= 2, got {self.rows!r}")


def bucket(r: float) -> str:
    """A ratio of error to bound in powers of 4, so that noise seldom moves a golden's key."""
    if not r <= 1:
        return "beyond its bound"
    if r == 0:
        return "error 0"
    for j in range(8):
        if r > 4.0 ** -(j + 1):
            return "error <= 1 of its bound" if j == 0 else f"error <= 1/{4**j} of its bound"
    return f"error <= 1/{4**8} of its bound"


@dataclasses.dataclass
class _Held:
    """One tensor held: its order in the event, the leaf, what it is, the ratio, error, bound."""

    order: int
    leaf: str
    tensor: str
    r: float
    err: float
    bound: float


class _Leaf:
    """One FP8 leaf's hooks, its delayed scales' replays and its weight's twin trajectory."""

    def __init__(self, run: _Run, name: str, twin: torch.nn.Linear) -> None:
        self.run, self.name = run, name
        rec = run.check.recipe
        self.replay = {r: getattr(rec, r).history() for r in "xwg"}
        self.has_bias = twin.bias is not None
        self.traj: dict[str, torch.Tensor] = {}
        self.traj_bound: dict[str, torch.Tensor] = {}
        self.saved: list[tuple] = []
        self.grad_before: dict[str, torch.Tensor | None] = {}
        self.module: torch.nn.Module | None = None

    def attach(self, module: torch.nn.Module) -> list:
        self.module = module
        for p in ("weight", "bias") if self.has_bias else ("weight",):
            if not isinstance(getattr(module, p, None), torch.Tensor):
                raise TypeError(
                    f"{self.run.check.name}: the FP8 submodule {self.name!r} has no tensor {p!r} as its twin has"
                )
        return [module.register_forward_hook(self.forward), module.register_full_backward_hook(self.backward)]

    def params(self) -> dict[str, torch.Tensor]:
        assert self.module is not None
        return {p: getattr(self.module, p) for p in (("weight", "bias") if self.has_bias else ("weight",))}

    def _error(self, role: str, t: torch.Tensor) -> torch.Tensor:
        e = operand_error(getattr(self.run.check.recipe, role), t, self.replay[role])
        if self.replay[role] is not None:
            self.replay[role].update(t.detach().abs().max().float() if t.numel() else torch.zeros(()))
        return e

    def forward(self, module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        x = inputs[0].detach().double()
        w = self.params()["weight"].detach().double().clone()
        x2 = x.reshape(-1, x.shape[-1])
        e_x, e_w = self._error("x", x2), self._error("w", w)
        want = x2 @ w.t()
        bound = gemm_bound(x2, e_x, w.t(), e_w.t(), output.dtype)
        if self.has_bias:
            b = self.params()["bias"].detach().double()
            want, bound = want + b, bound + torch.finfo(output.dtype).eps * b.abs()
        self.run.hold(self.name, "output", output.reshape(want.shape), want, bound)
        if torch.is_grad_enabled() and output.requires_grad:
            self.saved.append((x2, e_x, w, e_w, inputs[0].shape, inputs[0].dtype))

    def backward(self, module: torch.nn.Module, grad_input: tuple, grad_output: tuple) -> None:
        x2, e_x, w, e_w, shape, dtype = self.saved.pop()
        g = grad_output[0].detach().double().reshape(-1, w.shape[0])
        e_g = self._error("g", g)
        self.run.g[self.name] = (g, e_g, x2, e_x)
        if grad_input and grad_input[0] is not None:
            want = g @ w
            self.run.hold(
                self.name, "grad input", grad_input[0].reshape(want.shape), want, gemm_bound(g, e_g, w, e_w, dtype)
            )

    def hold_grads(self) -> None:
        """The weight's gradient of the backward pass just run (``.grad``'s change), to ``g^T x``."""
        g, e_g, x2, e_x = self.run.g.pop(self.name)
        for p, t in self.params().items():
            before = self.grad_before.get(p)
            # (no gradient at all is an error of the whole exact gradient)
            grad = (t.grad if t.grad is not None else torch.zeros_like(t)).detach().double()
            got = grad - (before if before is not None else 0.0)
            if p == "weight":
                want, bound = g.t() @ x2, gemm_bound(g.t(), e_g.t(), x2, e_x, t.dtype)
            else:  # a bias's gradient: a sum of the output gradient, no FP8 operand
                want, bound = g.sum(0), torch.finfo(t.dtype).eps * g.shape[0] * g.abs().sum(0)
            bound = bound + torch.finfo(t.dtype).eps * grad.abs()  # accumulated into .grad
            self.run.hold(self.name, f"grad {p}", got, want, bound)
            self.run.grad_bound[(self.name, p)] = self.run.grad_bound.get((self.name, p), 0) + bound
            self.run.grad_want[(self.name, p)] = self.run.grad_want.get((self.name, p), 0) + want


class _Run:
    """One lifecycle of one seed."""

    def __init__(self, check: ModuleCheck, seed: int) -> None:
        self.check, self.seed = check, seed
        torch.manual_seed(seed)
        self.module = check.fp8(seed)
        twin = check.twin(copy.deepcopy(self.module))
        self.leaves: dict[str, _Leaf] = {}
        for name, sub in twin.named_modules():
            if isinstance(sub, torch.nn.Linear):
                self.leaves[name] = _Leaf(self, name, sub)
        if not self.leaves:
            raise ValueError(f"{check.name}: twin: its module has no nn.Linear, so nothing can be held")
        self.in_features = next(s for s in twin.modules() if isinstance(s, torch.nn.Linear)).in_features
        self.g: dict[str, tuple] = {}
        self.held: list[_Held] = []
        self.grad_bound: dict = {}
        self.grad_want: dict = {}
        self.handles: list = []
        self.gen = torch.Generator().manual_seed(10_000 + seed)
        self.attach(self.module)
        for leaf in self.leaves.values():
            for p, t in leaf.params().items():
                leaf.traj[p] = t.detach().double().clone()
                leaf.traj_bound[p] = torch.zeros_like(leaf.traj[p])

    def attach(self, module: torch.nn.Module) -> None:
        for h in self.handles:
            h.remove()
        subs = dict(module.named_modules())
        self.handles = []
        for name, leaf in self.leaves.items():
            if name not in subs:
                raise ValueError(f"{self.check.name}: the twin's Linear {name!r} has no FP8 submodule of that name")
            self.handles += leaf.attach(subs[name])
        self.module = module
        self.opt = torch.optim.SGD([p for leaf in self.leaves.values() for p in leaf.params().values()], lr=0.0)

    def hold(self, leaf: str, tensor: str, got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor) -> None:
        self.held.append(_Held(len(self.held), leaf, tensor, *ratio(got, want, bound)))

    def batch(self, step: int, shape: tuple[int, ...] | None = None, zero: bool = False) -> torch.Tensor:
        k = self.in_features
        rows = self.check.rows
        x = torch.randn(rows, k, generator=self.gen)
        for i in range(rows // 2):  # signed one-hot rows: single weight elements held to their bound
            x[i] = 0.0
            x[i, (step * rows + i) % k] = 1.0 if i % 2 == 0 else -1.0
        if shape is not None:
            x = torch.randn(*shape, k, generator=self.gen)
        if zero:
            x = torch.zeros_like(x)
        return x.requires_grad_(True)

    def forward_backward(self, x: torch.Tensor) -> None:
        for leaf in self.leaves.values():
            leaf.grad_before = {
                p: (t.grad.detach().double().clone() if t.grad is not None else None) for p, t in leaf.params().items()
            }
        out = self.module(x)
        r = torch.randn(out.shape, generator=self.gen) * self.check.output_gradient
        (out.float() * r).sum().backward()
        for leaf in self.leaves.values():
            if leaf.name in self.g:
                leaf.hold_grads()

    def step(self, fraction: float) -> None:
        """One SGD step whose largest weight change is ``fraction`` of the largest weight, then
        the team's ``after_step``; the master weights held to the twin's trajectory."""
        ps = [(leaf, p, t) for leaf in self.leaves.values() for p, t in leaf.params().items() if t.grad is not None]
        w_max = max(float(t.detach().abs().max()) for _, _, t in ps)
        g_max = max(float(self.grad_want[(leaf.name, p)].abs().max()) for leaf, p, _ in ps)
        lr = fraction * w_max / g_max if g_max > 0 else 0.0
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        if self.check.after_step is not None:
            self.check.after_step(self.module)
        for leaf, p, t in ps:
            key = (leaf.name, p)
            want = leaf.traj[p] - lr * self.grad_want[key]
            eps = torch.finfo(t.dtype).eps
            leaf.traj_bound[p] = (
                leaf.traj_bound[p]
                + lr * self.grad_bound[key]
                + eps * (want.abs() + lr * (self.grad_want[key].abs() + self.grad_bound[key]))
            )
            leaf.traj[p] = want
            self.hold(leaf.name, f"{p} after the step", t, want, leaf.traj_bound[p])
        self.opt.zero_grad()
        self.grad_bound.clear()
        self.grad_want.clear()

    def reload(self) -> None:
        buf = io.BytesIO()
        torch.save(self.module.state_dict(), buf)
        buf.seek(0)
        fresh = self.check.fp8(self.seed + 1)
        fresh.load_state_dict(torch.load(buf, weights_only=False))
        self.attach(fresh)

    def event(self, i: int) -> list[_Held]:
        self.held = []
        name = EVENTS[i]
        if name == "after an SGD step":
            self.step(_SMALL)
        elif name == "after a large step":
            self.step(_LARGE)
        elif name in ("the step after the large one", "gradient accumulation (2 backward passes)"):
            self.step(_SMALL)
        elif name == "after state_dict save and load":
            self.step(_SMALL)
            self.reload()
        elif name == "eval (forward only)":
            self.opt.zero_grad()
            self.module.eval()
            with torch.no_grad():
                self.module(self.batch(i))
            self.module.train()
            return self.held
        if name == "gradient accumulation (2 backward passes)":
            self.forward_backward(self.batch(100 + i))
        shape = (self.check.rows + 5,) if name == "a batch of another shape" else None
        self.forward_backward(self.batch(i, shape, zero=name == "an all-zero batch"))
        return self.held


def _lines(run: _Run, leaf: str, tensor: str) -> str:
    """The team's lines that ran ``leaf``'s FP8 ops, a copy of it run on a forward and backward:
    the backward's for a gradient, the forward's for an output, both for a weight after a step."""
    from .sites import fp8_sites

    module = copy.deepcopy(dict(run.module.named_modules())[leaf])
    module._forward_hooks.clear()
    module._backward_hooks.clear()
    x = torch.randn(4, run.leaves[leaf].params()["weight"].shape[1]).requires_grad_(True)

    def backward(out: torch.Tensor) -> None:
        out.backward(torch.randn_like(out) * run.check.output_gradient)

    try:
        forward, back = fp8_sites(lambda: module(x), backward)
    except Exception as exc:  # (a location is a help: its failure is said, never hides the finding)
        return f"its FP8 ops not traced: {type(exc).__name__}: {exc}"
    phases = [("forward", forward)] if tensor == "output" else [("backward", back)]
    if tensor.endswith("after the step"):
        phases = [("forward", forward), ("backward", back)]
    said = [f"in the {phase} at: " + "; ".join(chains) for phase, chains in phases if chains]
    if not said:
        return "no FP8 op of it recorded in the " + " or ".join(p for p, _ in phases) + " (its FP8 work is elsewhere)"
    return "its FP8 ops ran " + "; and ".join(said) + " (each innermost first, <- its caller)"


def _problem(check: ModuleCheck, run: _Run, seed: int, bad: _Held) -> str:
    return (
        f"seed {seed}: submodule {bad.leaf!r}, {bad.tensor}: error {bad.err:.3g} where its bound allows {bad.bound:.3g}"
        f" ({bad.r:.3g} times the bound); " + _lines(run, bad.leaf, bad.tensor)
    )


def check_module(
    check: ModuleCheck, seeds: range | list[int] = range(1), label: str | None = None
) -> list[ClaimResult]:
    """The module check's results, one per lifecycle event: passed with the largest error as a
    bucketed fraction of its bound (over ``seeds``), or the first tensor outside its bound."""
    if not isinstance(check, ModuleCheck):
        raise TypeError(f"check: expected a ModuleCheck, got {check!r}")
    seeds = list(seeds)
    if not seeds or not all(isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds: expected one or more ints, got {seeds!r}")
    claim = f"twin {label or check.name}"
    worst: dict[int, _Held | None] = {i: None for i in range(len(EVENTS))}
    problems: dict[int, str] = {}
    for seed in seeds:
        run = _Run(check, seed)
        try:
            for i in range(len(EVENTS)):
                held = run.event(i)
                if i in problems:
                    continue
                bad = next((h for h in held if not h.r <= 1), None)
                if bad is not None:
                    problems[i] = _problem(check, run, seed, bad)
                top = max(held, key=lambda h: h.r, default=None)
                if top is not None and (worst[i] is None or top.r > worst[i].r):  # type: ignore[union-attr]
                    worst[i] = top
        finally:
            for h in run.handles:
                h.remove()
    out = []
    for i, event in enumerate(EVENTS):
        top = worst[i]
        if i in problems:
            out.append(ClaimResult(claim, event, problems[i], measure=bucket(math.inf)))
        else:
            r = top.r if top is not None else 0.0
            where = f": {top.leaf} {top.tensor}" if top is not None else ""
            out.append(
                ClaimResult(claim, event, None, measure=bucket(r), margin=f"largest error {r:.3g} of its bound{where}")
            )
    return out
