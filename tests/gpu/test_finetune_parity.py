"""bf16 vs FP8 training on the GPU: the 4b-shaped preset (Qwen3-4B's GEMM shapes, 4 layers),
seq 2048, batch 4, 200 steps, both runs compiled, FP8 through torchao's tensorwise recipe.

Asserted: both runs learn; FP8's tail loss is within ``FP8_BUDGET['4b-shaped']`` (1%) of the mean of
three bf16 runs plus ``PARITY_Z`` times the run-to-run noise floor measured from those runs (two
start from one-ulp-nudged weights), the same rule as the CPU test; and on sm90+ the FP8 run is not
slower than bf16 (turn off with --fp8-no-speed-asserts). The tokens/s ratio, the gap, the noise
floor and peak memory go to the "FP8 throughput" table. Set FP8REF_RESULTS_DIR to keep the
results JSON and the loss plot.

Under --fp8-dry-run (no GPU) the same test trains the tiny preset on the CPU, compiled, for a few
steps (no noise runs) and asserts only what holds there (learning, same start, no speed)."""

import math
import os

import pytest

from fp8ref.finetune import FinetuneConfig, compare, parity_line, plot_losses, save_results, summary_lines

pytestmark = [
    pytest.mark.gpu_long,
    pytest.mark.needs("transformers", "datasets"),
    pytest.mark.needs("torchao"),
    pytest.mark.sm(89, "FP8 tensor cores"),
]


def test_4b_shaped_bf16_vs_fp8_loss_parity_and_speed(gpu_device, dry_run, speed_asserts, record_throughput):
    if dry_run:
        cfg = FinetuneConfig(preset="tiny", steps=12, compile=True, device="cpu", noise_runs=0)
    else:
        cfg = FinetuneConfig(
            preset="4b-shaped", seq_len=2048, batch=4, steps=200, compile=True, device=gpu_device, noise_runs=2
        )
    res = compare(cfg)
    out_dir = os.environ.get("FP8REF_RESULTS_DIR")
    if out_dir:
        name = f"finetune-{res['versions']['device']}-{cfg.preset}"
        save_results(res, os.path.join(out_dir, name + ".json"))
        plot_losses(res, os.path.join(out_dir, name + ".png"))
    print("\n".join(summary_lines(res)))

    b, f = res["runs"]["bf16"], res["runs"]["fp8"]
    assert b["init_checksum"] == f["init_checksum"]
    for label, run in (("bf16", b), ("fp8", f)):
        assert all(x is not None and math.isfinite(x) for x in run["losses"]), f"{label} diverged"
        assert run["tail_loss"] < 0.8 * run["losses"][0], f"{label} did not learn"
    record_throughput(
        {
            "name": f"finetune {cfg.preset} bf16 vs fp8 (torchao tensorwise, compiled)",
            "bf16_tok_s": b["tokens_per_s"],
            "fp8_tok_s": f["tokens_per_s"],
            "fp8_over_bf16": res["speedup"],
            "tail_gap_pct": 100 * res["tail_gap"],
            "parity_gap_pct": 100 * res["parity"]["gap"],
            **({"noise_floor_pct": 100 * res["parity"]["noise"]} if res["parity"]["noise"] else {}),
            **{
                f"{label}_peak_gib": run["peak_memory_bytes"] / 2**30
                for label, run in (("bf16", b), ("fp8", f))
                if run["peak_memory_bytes"] is not None
            },
        }
    )
    if dry_run:
        return  # a dozen steps on the CPU: no parity bound (the tiny cpu test has one), no speed
    assert res["parity"]["within"], parity_line(res["parity"])
    import torch

    if speed_asserts and torch.cuda.get_device_capability()[0] >= 9:
        assert res["speedup"] >= 1.0, f"FP8 slower than bf16: {summary_lines(res)}"
