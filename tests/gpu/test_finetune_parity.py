"""bf16 vs FP8 training on the GPU: the 4b-shaped preset (Qwen3-4B's GEMM shapes, 4 layers),
seq 2048, batch 4, 200 steps, both runs compiled, FP8 through torchao's tensorwise recipe.

Asserted: the FP8 run converted every linear of the model's layers (seven per Qwen3 layer) to
torchao's Float8Linear; both runs learn; FP8's tail loss is within ``FP8_BUDGET['4b-shaped']`` (1%)
of the mean of three bf16 runs plus ``PARITY_Z`` times the run-to-run noise floor measured from
those runs (two start from one-ulp-nudged weights), the same rule as the CPU test. Speed is never
asserted: the tokens/s ratio, the gap, the noise floor and peak memory go to the "FP8 throughput"
table. Set FP8REF_RESULTS_DIR to keep the results JSON and the loss plot.

Under --fp8-dry-run (no GPU) the same test trains the tiny preset on the CPU, compiled, for a few
steps (no noise runs) and asserts only what holds there (conversion, learning, same start)."""

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


# q, k, v, o projections; gate, up, down of the SwiGLU MLP (as tests/cpu/application/test_finetune_parity.py)
LINEARS_PER_QWEN3_LAYER = 7


def test_4b_shaped_bf16_vs_fp8_loss_parity(gpu_device, dry_run, record_throughput):
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
    want = LINEARS_PER_QWEN3_LAYER * res["config"]["layers"]
    assert res["model"]["fp8_linears"] == want, f"{res['model']['fp8_linears']} FP8 linears, expected {want}"
    assert b["init_checksum"] == f["init_checksum"]
    for label, run in (("bf16", b), ("fp8", f)):
        assert all(x is not None and math.isfinite(x) for x in run["losses"]), f"{label} diverged"
        assert run["tail_loss"] < 0.8 * run["losses"][0], f"{label} did not learn"
    record_throughput(
        {
            "name": f"finetune {cfg.preset} bf16 vs fp8 (torchao tensorwise, compiled)",
            "bf16_tok_s": b["tokens_per_s"],
            "fp8_tok_s": f["tokens_per_s"],
            # a same-run ratio only where FP8 runs on FP8 hardware; the dry run's CPU emulation says why not
            **({"fp8_over_bf16": res["speedup"]} if res["speedup"] is not None else {"speed": res["speed_note"]}),
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
        return  # a dozen steps on the CPU: no parity bound (the tiny cpu test has one)
    assert res["parity"]["within"], parity_line(res["parity"])
