"""The fine-tune comparison's outputs: the results JSON, the summary lines (the verdict's two
statements among them) and the loss plot."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from ..harness.profiles.atomic import replacing, write_text
from ..harness.stack.install import require
from .presets import PARITY_Z

__all__ = [
    "save_results",
    "summary_lines",
    "speed_line",
    "difference_line",
    "budget_line",
    "parity_line",
    "loss_figure",
    "plot_losses",
]


def save_results(results: dict, path: str | Path) -> Path:
    """Write the results as JSON (NaN written as null)."""

    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return write_text(path, json.dumps(clean(results), indent=1) + "\n")


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _pct(x: float | None, spec: str = ".2f") -> str:
    return _fmt(None if x is None else 100 * x, spec)


def speed_line(results: dict) -> str:
    """FP8's tokens/s over bf16's in the same run, or why there is no such figure (FP8 emulated)."""
    note = results.get("speed_note")
    if note:
        return f"speed: {note}"
    return f"speed: FP8 at {_fmt(results.get('speedup'), '.2f')}x bf16's tokens/s (same run)"


def summary_lines(results: dict) -> list[str]:
    """The human-readable outcome: one line per run, the speed, then the verdict's two statements
    (whether FP8 differs measurably from bf16; whether it is within its budget)."""
    c, r = results["config"], results["runs"]
    emulated = " (FP8 emulated)" if results.get("speed_note") else ""
    lines = [
        f"{results['model']['source']}, {results['model']['parameters']:,} parameters; "
        f"{results['model']['fp8_linears']} FP8 linears ({c['backend']} {c['recipe']}); "
        f"{c['steps']} steps of {c['batch']}x{c['seq_len']} tokens on {results['versions']['device']}"
    ]
    for label in ("bf16", "fp8"):
        lines.append(
            f"{label:5s} {_fmt(r[label]['tokens_per_s'], ',.0f')} tok/s{emulated if label == 'fp8' else ''}, "
            f"mean loss of the last {results['tail_steps']} steps {_fmt(r[label]['tail_loss'], '.4f')}"
        )
    floor = results["data"]["loss_floor"]
    lines.append(speed_line(results))
    lines.append(
        f"tail loss gap against the first bf16 run {_pct(results['tail_gap'], '+.2f')}%"
        + (f" (corpus loss floor {floor:.3f} nats/token)" if floor is not None else "")
    )
    lines += [difference_line(results["parity"]), budget_line(results["parity"])]
    return lines


def difference_line(v: dict) -> str:
    """The first statement: FP8's gap in noise units, how uncertain the noise is, and whether FP8
    differs measurably from bf16 (``parity_rule.parity``)."""
    gap, n = v.get("gap"), int(v.get("bf16_runs") or 1)
    head = f"measured: FP8 {_pct(gap, '+.2f')}% vs the mean of {n} bf16 run{'s' if n != 1 else ''}"
    if gap is None or not math.isfinite(gap):
        return "measured: nothing, a run diverged"
    if v.get("noise") is None:
        return f"{head}; no noise estimate from one bf16 run, so whether FP8 differs measurably is not known"
    conf, t, interval = v.get("confidence"), v.get("t_critical"), v.get("noise_interval")
    spread = f"noise {_pct(v['noise'])}%"
    if interval:
        spread += f" ({conf:.0%} interval {_pct(interval[0])}-{_pct(interval[1])}%, {n - 1} degrees of freedom)"
    if t is None or v.get("different") is None:
        return f"{head} = {_fmt(v.get('z_score'), '+.1f')} noise sd; {spread}"
    word = "measurably different from" if v["different"] else "not measurably different from"
    return (
        f"{head} = {_fmt(v.get('z_score'), '+.1f')} noise sd; {spread}; "
        f"one more bf16 run lands within +-{t:.2f} sd {conf:.0%} of the time: FP8 is {word} bf16"
    )


def budget_line(v: dict) -> str:
    """The second statement: FP8's gap as a fraction of its budget and the verdict against the
    parity bound (budget + z x noise), then where the budget comes from."""
    gap, budget = v.get("gap"), v.get("budget")
    if gap is None or not math.isfinite(gap):
        return f"budget: OUTSIDE: a run diverged, so there is no gap to hold to FP8's {_pct(budget)}% budget"
    verdict = "within" if v.get("within") else "OUTSIDE"
    frac = v.get("budget_fraction")
    used = f" is {_fmt(None if frac is None else 100 * frac, '.0f')}% of" if frac is not None else " against"
    if v.get("noise") is None:
        bound = f"the parity bound, the budget alone, {_pct(v.get('bound'))}%"
    else:
        bound = f"the parity bound {_pct(budget)}% + {v.get('z', PARITY_Z):g} x noise = {_pct(v.get('bound'))}%"
    source = f". The budget is {v['budget_source']}" if v.get("budget_source") else ""
    return f"budget: |gap| {_pct(abs(gap))}%{used} FP8's {_pct(budget)}% budget; {verdict} {bound}{source}"


def parity_line(v: dict) -> str:
    """The verdict in one line (both statements), for assertion messages and observations."""
    return f"parity: {difference_line(v)}; {budget_line(v)}"


def _no_none(values: list) -> list[float]:
    return [math.nan if x is None else x for x in values]


def loss_figure(results: dict) -> Any:
    """The loss plot as a matplotlib Figure: the loss curves (with the noise runs and the corpus
    floor when known) above; below, each run against the per-step mean of the bf16 runs, with
    the noise band of the tail (where one more bf16 run lands with the verdict's confidence), the
    parity bound and FP8's gap. The title says the speed (or why there is none) and the verdict's
    two statements."""
    require("matplotlib", "the loss plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r, c, v = results["runs"], results["config"], results["parity"]
    noted = bool(results.get("speed_note"))
    b, f = _no_none(r["bf16"]["losses"]), _no_none(r["fp8"]["losses"])
    steps = list(range(1, len(b) + 1))
    noise_labels = [k for k in r if k.startswith("bf16~")]
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for i, label in enumerate(noise_labels):
        ax.plot(
            steps,
            _no_none(r[label]["losses"]),
            color="C0",
            alpha=0.35,
            lw=0.8,
            label="bf16, one-ulp-nudged weights (noise runs)" if i == 0 else None,
        )

    def rate(label: str) -> str:  # tokens/s beside a curve only where they compare as speed
        return "" if noted else f" ({_fmt(r[label]['tokens_per_s'], ',.0f')} tok/s)"

    ax.plot(steps, b, color="C0", label=f"bf16{rate('bf16')}", lw=1.2)
    ax.plot(steps, f, color="C1", label=f"FP8 {c['backend']} {c['recipe']}{rate('fp8')}", lw=1.2)
    floor = results["data"]["loss_floor"]
    if floor is not None:
        ax.axhline(floor, color="grey", ls="--", lw=1, label=f"corpus entropy floor {floor:.3f}")
    ax.set_ylabel("training loss (nats/token)")
    statements = [speed_line(results), difference_line(v), budget_line(v)]
    ax.set_title("\n".join([str(results["model"]["source"])] + [textwrap.fill(s, 120) for s in statements]), fontsize=7)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)

    # below: each run against the per-step mean of the bf16 runs, in percent
    bf16_runs = [b] + [_no_none(r[label]["losses"]) for label in noise_labels]
    mean = [sum(col) / len(col) for col in zip(*bf16_runs)]

    def relative(curve: list[float]) -> list[float]:
        return [100 * (y / m - 1) for y, m in zip(curve, mean)]

    for i, run in enumerate(bf16_runs if noise_labels else []):
        dx.plot(steps, relative(run), color="C0", alpha=0.35, lw=0.8, label="each bf16 run" if i == 0 else None)
    dx.plot(steps, relative(f), color="C1", lw=0.9, label="FP8")
    tail = [max(1, len(steps) - int(results.get("tail_steps") or 1) + 1), len(steps)]
    if v.get("noise") is not None and v.get("t_critical") is not None:
        band = 100 * v["t_critical"] * v["noise"]
        dx.fill_between(
            tail,
            -band,
            band,
            color="C0",
            alpha=0.25,
            label=f"bf16 noise band: one more bf16 run's tail lands here {v.get('confidence', 0.95):.0%} of the time",
        )
    if v.get("bound") is not None:
        for sign in (1, -1):
            dx.hlines(
                sign * 100 * v["bound"],
                *tail,
                colors="C3",
                linestyles="--",
                lw=1,
                label="parity bound (budget + z x noise)" if sign == 1 else None,
            )
    gap = v.get("gap")
    if gap is not None and math.isfinite(gap):
        dx.hlines(100 * gap, *tail, colors="C1", lw=2.5, label=f"FP8 tail gap {100 * gap:+.2f}%")
    dx.axhline(0.0, color="grey", lw=0.8)
    dx.set_ylabel("vs the bf16 mean (%)")
    dx.set_xlabel("step")
    dx.legend(fontsize=6, loc="lower left")  # (the tail, on the right, stays clear)
    dx.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_losses(results: dict, path: str | Path) -> Path:
    """``loss_figure`` written as a PNG, whole or not at all."""
    fig = loss_figure(results)
    import matplotlib.pyplot as plt

    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png", bbox_inches="tight")  # (every label inside)
    finally:
        plt.close(fig)
    return Path(path)
