"""The fine-tune comparison's outputs: the results JSON, the summary lines and the loss plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..harness.profiles.atomic import replacing, write_text
from ..harness.stack.install import require
from .presets import PARITY_Z

__all__ = ["save_results", "summary_lines", "parity_line", "plot_losses"]


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


def summary_lines(results: dict) -> list[str]:
    """The human-readable outcome: one line per run, then speedup and gap."""
    c, r = results["config"], results["runs"]
    lines = [
        f"{results['model']['source']}, {results['model']['parameters']:,} parameters; "
        f"{results['model']['fp8_linears']} FP8 linears ({c['backend']} {c['recipe']}); "
        f"{c['steps']} steps of {c['batch']}x{c['seq_len']} tokens on {results['versions']['device']}"
    ]
    for label in ("bf16", "fp8"):
        lines.append(
            f"{label:5s} {_fmt(r[label]['tokens_per_s'], ',.0f')} tok/s, mean loss of the last "
            f"{results['tail_steps']} steps {_fmt(r[label]['tail_loss'], '.4f')}"
        )
    floor = results["data"]["loss_floor"]
    lines.append(
        f"speedup {_fmt(results['speedup'], '.2f')}x, tail loss gap "
        f"{_fmt(None if results['tail_gap'] is None else 100 * results['tail_gap'], '+.2f')}%"
        + (f" (corpus loss floor {floor:.3f} nats/token)" if floor is not None else "")
    )
    lines.append(parity_line(results["parity"]))
    return lines


def _pct(x: float | None) -> str:
    return _fmt(None if x is None else 100 * x, ".2f")


def parity_line(v: dict) -> str:
    """The parity verdict in one line: gap vs the bf16 mean, the noise floor, the bound."""
    noise = (
        f"noise floor {_pct(v['noise'])}% from {v['bf16_runs']} bf16 runs (gap = {_fmt(v['z_score'], '+.1f')} sd)"
        if v["noise"] is not None
        else "no noise floor (one bf16 run)"
    )
    verdict = "within" if v["within"] else "OUTSIDE"
    return (
        f"parity: FP8 {_fmt(None if v['gap'] is None else 100 * v['gap'], '+.2f')}% vs the bf16 mean; {noise}; "
        f"{verdict} the bound {_pct(v['budget'])}% + {PARITY_Z:g} x noise = {_pct(v['bound'])}%"
    )


def plot_losses(results: dict, path: str | Path) -> Path:
    """A PNG of both loss curves (and the corpus floor when known), with the FP8 - bf16 difference below."""
    require("matplotlib", "the loss plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r, c = results["runs"], results["config"]
    nan = float("nan")
    b = [nan if x is None else x for x in r["bf16"]["losses"]]
    f = [nan if x is None else x for x in r["fp8"]["losses"]]
    steps = range(1, len(b) + 1)
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for i, label in enumerate(k for k in r if k.startswith("bf16~")):
        ax.plot(
            steps,
            [nan if x is None else x for x in r[label]["losses"]],
            color="C0",
            alpha=0.35,
            lw=0.8,
            label="bf16, one-ulp-nudged weights (noise floor)" if i == 0 else None,
        )
    ax.plot(steps, b, label=f"bf16 ({_fmt(r['bf16']['tokens_per_s'], ',.0f')} tok/s)", lw=1.2)
    ax.plot(
        steps, f, label=f"FP8 {c['backend']} {c['recipe']} ({_fmt(r['fp8']['tokens_per_s'], ',.0f')} tok/s)", lw=1.2
    )
    floor = results["data"]["loss_floor"]
    if floor is not None:
        ax.axhline(floor, color="grey", ls="--", lw=1, label=f"corpus entropy floor {floor:.3f}")
    ax.set_ylabel("training loss (nats/token)")
    gap = results["tail_gap"]
    ax.set_title(
        f"{results['model']['source']}\nspeedup {_fmt(results['speedup'], '.2f')}x, tail loss gap "
        f"{_fmt(None if gap is None else 100 * gap, '+.2f')}% (last {results['tail_steps']} steps)\n"
        + parity_line(results["parity"]).replace("; noise", ";\nnoise", 1),
        fontsize=8,
    )
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    dx.plot(steps, [y - x for x, y in zip(b, f)], lw=0.8, color="C2")
    dx.axhline(0.0, color="grey", lw=0.8)
    dx.set_ylabel("FP8 - bf16")
    dx.set_xlabel("step")
    dx.grid(alpha=0.3)
    fig.tight_layout()
    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png", bbox_inches="tight")  # (every label inside)
    finally:
        plt.close(fig)
    return Path(path)
