"""bf16 vs FP8 training on the tiny preset (CPU): both runs learn, start from the same weights,
FP8's tail loss is within its budget plus the noise floor measured from one-ulp-nudged bf16 runs,
the verdict says apart whether FP8 differs measurably and whether it is within its budget, no
run goes below the corpus's entropy floor, emulated FP8 gets no speed figure; the results JSON
and plot (with the noise band); the emulation against torchao on a first step. The GPU twin:
tests/gpu/test_finetune_parity.py."""

import json
import math

import pytest
import torch

from fp8ref.finetune import (
    FP8_BUDGET,
    PARITY_Z,
    FinetuneConfig,
    budget_line,
    compare,
    difference_line,
    nudge_weights,
    parity,
    parity_line,
    plot_losses,
    save_results,
    speed_note,
    summary_lines,
    tail_gap,
)
from fp8ref.finetune.corpus import GRAMMAR
from fp8ref.reference.recipes import TORCHAO_RECIPES

pytestmark = pytest.mark.needs("transformers", "datasets")


LINEARS_PER_QWEN3_LAYER = 7  # q, k, v, o projections; gate, up, down of the SwiGLU MLP


@pytest.fixture(scope="module")
def tiny(finetune_tiny):
    """The comparison every test of it reads (tests that use it carry needs("torchao")), as its
    JSON reads back: trained once per run, beside the other tests (tests/plugins/beside.py). Its
    22 s of one core are the suite's largest single cost, so its readers are in the slow tier
    (CI runs it): the default tier keeps the fine-tune command end to end on 4 steps
    (test_finetune_cli) and Float8Linear against fp8ref bitwise (test_torchao_linear)."""
    return finetune_tiny


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_both_runs_learn_well_below_their_start(tiny):
    for label in ("bf16", "fp8"):
        losses = tiny["runs"][label]["losses"]
        # a random-init model starts near the uniform loss ln(vocab) ...
        assert losses[0] == pytest.approx(math.log(272), rel=0.05), label
        # ... and the tail mean ends far below it
        assert tiny["runs"][label]["tail_loss"] < 0.5 * losses[0], label


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_both_runs_start_from_the_same_weights_and_batches(tiny):
    b, f = tiny["runs"]["bf16"], tiny["runs"]["fp8"]
    assert b["init_checksum"] == f["init_checksum"]
    # step 1 sees the same weights and batch: only the FP8 casts differ, so the losses are close
    # but not equal (equal would mean the FP8 run never cast anything)
    assert f["losses"][0] == pytest.approx(b["losses"][0], rel=0.01)
    assert f["losses"] != b["losses"]


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_fp8_tail_loss_is_within_its_budget_plus_the_noise_floor(tiny, record_observation):
    v = tiny["parity"]
    record_observation("finetune tiny: FP8 vs bf16 (torchao tensorwise, CPU)", parity_line(v))
    assert v["bf16_runs"] == 3 and v["noise"] is not None
    assert v["within"], parity_line(v)
    # the comparison resolves FP8's error only while the runs' own divergence is below the budget
    assert PARITY_Z * v["noise"] < FP8_BUDGET["tiny"], f"noise floor too high to judge FP8: {parity_line(v)}"


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_noise_runs_start_one_ulp_away_and_diverge(tiny):
    """The noise runs see the same batches from weights one ulp away in one element per matrix,
    so their initial checksums differ by almost nothing, and their losses drift apart."""
    base = tiny["runs"]["bf16"]
    for label in ("bf16~1", "bf16~2"):
        run = tiny["runs"][label]
        assert run["nudge"] > 0 and run["init_checksum"] != base["init_checksum"], label
        assert run["init_checksum"] == pytest.approx(base["init_checksum"], abs=1e-3), label
        assert run["losses"][0] == pytest.approx(base["losses"][0], rel=1e-3), label
        assert run["losses"] != base["losses"], label


def _fp8_parity_under(tiny: dict, name: str) -> dict:
    """FP8 trained again under a perturbation from ``fp8ref.faults``, judged against the fixture's
    three bf16 runs (the perturbations change only torchao's FP8 path)."""
    from fp8ref.finetune.faults import perturbation
    from fp8ref.harness.stack.install import one_thread

    with perturbation(name), one_thread():  # the fixture's runs trained on one thread too
        res = compare(FinetuneConfig(preset="tiny", noise_runs=0))
    bf16 = [tiny["runs"][label]["tail_loss"] for label in ("bf16", "bf16~1", "bf16~2")]
    return parity(bf16, res["runs"]["fp8"]["tail_loss"], FP8_BUDGET["tiny"])


@pytest.mark.slow
@pytest.mark.needs("torchao")
@pytest.mark.parametrize("name", ["scale-one-ulp"])
def test_parity_passes_a_benign_change(tiny, name):
    """A change in FP8's arithmetic that is not an error (every scale one float32 ulp larger once
    moved the old single-run gap from +1.1% to +5.7%) stays within the bound."""
    v = _fp8_parity_under(tiny, name)
    assert v["within"], f"{name}: {parity_line(v)}"


@pytest.mark.slow
@pytest.mark.needs("torchao")
@pytest.mark.parametrize("name", ["weight-scale-x2", "grad-scale-missing"])
def test_parity_fails_under_a_real_fp8_fault(tiny, name):
    """Faults a regression could bring, which the loss comparison must see (docs/finetune-parity.md
    lists the ones it cannot, and which other test catches them)."""
    v = _fp8_parity_under(tiny, name)
    assert not v["within"], f"{name} went unnoticed: {parity_line(v)}"


def test_nudge_moves_one_element_per_weight_matrix_by_one_ulp():
    lin = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 2)).to(torch.bfloat16)
    before = [p.detach().clone() for p in lin.parameters()]
    assert nudge_weights(lin, 1) == 2
    for old, new in zip(before, lin.parameters()):
        changed = (old.view(torch.int16) != new.detach().view(torch.int16)).nonzero()
        if old.dim() == 2:
            assert len(changed) == 1
            i = tuple(changed[0].tolist())
            assert int(new.detach().view(torch.int16)[i]) - int(old.view(torch.int16)[i]) == 1
        else:
            assert len(changed) == 0  # biases and norms untouched
    with pytest.raises(ValueError, match="which"):
        nudge_weights(lin, 0)


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_the_verdict_states_a_measurable_difference_apart_from_the_budget(tiny):
    """Two statements, in the JSON and the printed summary: the gap in noise units against what
    one more bf16 run would show (with the noise estimate's interval from three runs), and the gap
    as a fraction of the budget, whose origin is named, against the parity bound."""
    v = tiny["parity"]
    assert v["statements"] == {"difference": difference_line(v), "budget": budget_line(v)}, v["statements"]
    assert isinstance(v["different"], bool) and v["different"] == (abs(v["z_score"]) > v["t_critical"]), v
    assert v["budget_fraction"] == pytest.approx(abs(v["gap"]) / v["budget"]), v
    low, high = v["noise_interval"]
    assert low < v["noise"] < high, v
    assert v["budget_source"].startswith("the tiny preset's: FP8's measured cost"), v["budget_source"]
    word = "measurably different" if v["different"] else "not measurably different"
    assert f"FP8 is {word} from bf16" in v["statements"]["difference"], v["statements"]
    assert "of FP8's 3.00% budget; within the parity bound" in v["statements"]["budget"], v["statements"]
    lines = summary_lines(tiny)
    assert v["statements"]["difference"] in lines and v["statements"]["budget"] in lines, lines


def test_measurably_different_and_within_the_budget_are_separate_statements():
    """The same three bf16 runs (noise 2% x sqrt(4/3)), FP8 at three gaps: not measurably
    different and within; measurably different and within; measurably different and outside.
    With 2 degrees of freedom one more run lands within +-4.303 noise sd 95% of the time (Student
    t; NIST/SEMATECH e-Handbook 1.3.6.7.2), and the noise's 95% interval is noise x
    sqrt(2 / 7.378) to noise x sqrt(2 / 0.0506) (chi-square; the same handbook, 1.3.6.7.4)."""
    bf16, noise = [1.0, 1.02, 0.98], 0.02 * math.sqrt(4 / 3)
    cases = {1.05: (False, True), 1.15: (True, True), 1.30: (True, False)}  # fp8 -> (different, within)
    for fp8, (different, within) in cases.items():
        v = parity(bf16, fp8, budget=0.1)
        assert (v["different"], v["within"]) == (different, within), (fp8, v)
        assert v["t_critical"] == pytest.approx(4.303, abs=5e-4) and v["confidence"] == 0.95
        assert v["noise_interval"] == pytest.approx(
            [noise * math.sqrt(2 / 7.378), noise * math.sqrt(2 / 0.0506)], rel=2e-3
        )
        assert v["budget_fraction"] == pytest.approx((fp8 - 1) / 0.1)
        text = difference_line(v)
        assert ("FP8 is not measurably different" in text) == (not different), text
        assert ("; within the parity bound" in budget_line(v)) == within, budget_line(v)
    diverged = parity([1.0, None], 1.05, budget=0.1)
    assert difference_line(diverged) == "measured: nothing, a run diverged", difference_line(diverged)
    assert budget_line(diverged).startswith("budget: OUTSIDE: a run diverged"), budget_line(diverged)
    one = parity([1.0], 1.05, budget=0.1)
    assert (one["different"], one["t_critical"], one["noise_interval"]) == (None, None, None), one
    assert "whether FP8 differs measurably is not known" in difference_line(one), difference_line(one)


@pytest.mark.parametrize(
    "preset,model,budget,expected",
    [
        ("tiny", None, FP8_BUDGET["tiny"], "the tiny preset's: FP8's measured cost +0.90%"),
        ("4b-shaped", None, FP8_BUDGET["4b-shaped"], "the 4b-shaped preset's: "),
        ("tiny", "Qwen/Qwen3-4B", 0.01, "the default for a pretrained model (--model)"),
        ("tiny", None, 0.05, "set by the caller (--fp8-budget)"),
    ],
)
def test_the_verdict_names_where_its_budget_comes_from(preset, model, budget, expected):
    from fp8ref.finetune import budget_source

    assert budget_source(preset, model, budget).startswith(expected), budget_source(preset, model, budget)
    v = parity([1.0, 1.01], 1.02, budget=budget, budget_source=budget_source(preset, model, budget))
    assert budget_line(v).endswith(f"The budget is {budget_source(preset, model, budget)}"), budget_line(v)


def test_parity_bound_is_the_budget_plus_z_times_the_noise():
    v = parity([1.0, 1.02, 0.98], 1.10, budget=0.05)
    noise = 0.02 * math.sqrt(1 + 1 / 3)
    assert v["baseline"] == pytest.approx(1.0) and v["noise"] == pytest.approx(noise)
    assert v["gap"] == pytest.approx(0.10) and v["bound"] == pytest.approx(0.05 + PARITY_Z * noise)
    assert v["within"] and v["z_score"] == pytest.approx(0.10 / noise)
    assert not parity([1.0, 1.02, 0.98], 1.13, budget=0.05)["within"]
    assert not parity([1.0, 1.02, 0.98], 0.87, budget=0.05)["within"]  # far better is suspect too
    one = parity([1.0], 1.04, budget=0.05)
    assert one["noise"] is None and one["bound"] == 0.05 and one["within"]
    assert not parity([1.0, None], 1.0, budget=0.05)["within"]  # a diverged run is never within
    assert not parity([1.0, 1.01], math.nan, budget=0.05)["within"]


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_no_run_beats_the_corpus_entropy_floor(tiny):
    # Below the entropy rate would mean the model saw its labels (a shifting bug), not skill.
    assert tiny["data"]["loss_floor"] == pytest.approx(GRAMMAR.loss_floor())
    for label in ("bf16", "fp8"):
        assert min(tiny["runs"][label]["losses"]) > tiny["data"]["loss_floor"], label


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_the_module_filter_converts_every_decoder_linear_but_the_head(tiny):
    cfg = tiny["config"]
    assert tiny["model"]["fp8_linears"] == LINEARS_PER_QWEN3_LAYER * cfg["layers"]
    assert tiny["model"]["kept_high_precision"] == ["lm_head"]


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_throughput_is_measured_after_warm_up(tiny):
    cfg = FinetuneConfig(preset="tiny").resolved()
    for label in ("bf16", "fp8"):
        run = tiny["runs"][label]
        assert run["throughput_steps"] == cfg.steps - cfg.throughput_warmup
        timed = run["step_seconds"][cfg.throughput_warmup :]
        assert run["tokens_per_s"] == pytest.approx(cfg.batch * cfg.seq_len * len(timed) / sum(timed))


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_emulated_fp8_on_the_cpu_gets_no_speed_figure(tiny):
    """On the CPU, FP8 is emulated (torchao's casts, float32 matmuls): its tokens/s against bf16's
    times the emulation, so no ratio is reported as a speedup, in the JSON or the summary."""
    note = "FP8 emulated on CPU: no speed figure"
    assert tiny["speedup"] is None and tiny["speed_note"] == note, (tiny["speedup"], tiny["speed_note"])
    lines = summary_lines(tiny)
    assert f"speed: {note}" in lines and not any("speedup" in line or "x bf16" in line for line in lines), lines


@pytest.mark.parametrize(
    "device,backend,emulate,expected",
    [
        ("cpu", "torchao", True, "FP8 emulated on CPU: no speed figure"),
        ("cpu", "fp8ref", False, "FP8 emulated on CPU: no speed figure"),
        ("cpu", "torchao", False, "FP8 on CPU, which has no FP8 units: no speed figure"),
        ("cuda", "torchao", True, "FP8 emulated on cuda: no speed figure"),
        ("cuda", "fp8ref", False, "FP8 emulated on cuda: no speed figure"),
        ("cuda", "torchao", False, None),  # torch._scaled_mm on the GPU: the one real speed figure
    ],
)
def test_a_speed_figure_only_for_fp8_hardware(device, backend, emulate, expected):
    assert speed_note(FinetuneConfig(device=device, backend=backend, emulate=emulate)) == expected


@pytest.mark.slow
@pytest.mark.needs("torchao")
def test_results_json_round_trips(tiny, tmp_path):
    path = save_results(tiny, tmp_path / "r.json")
    back = json.loads(path.read_text())
    assert back["schema"] == "fp8ref.finetune/3"
    assert back["parity"]["within"] == tiny["parity"]["within"]
    assert back["runs"]["fp8"]["losses"] == tiny["runs"]["fp8"]["losses"]
    assert back["versions"]["torch"] == torch.__version__
    assert back["config"]["recipe"] == "tensorwise" and back["config"]["backend"] == "torchao"


@pytest.mark.slow
@pytest.mark.needs("torchao", "matplotlib")
def test_plot_is_a_png(tiny, tmp_path):
    path = plot_losses(tiny, tmp_path / "r.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.needs("torchao", "matplotlib")
def test_plot_shows_the_noise_band_both_statements_and_no_speed_figure(tiny):
    """The lower panel shades the tail's noise band (+- t x noise, in percent of the bf16 mean),
    and the title carries the speed note and the verdict's two statements, never a speedup."""
    import matplotlib.pyplot as plt

    from fp8ref.finetune.report import loss_figure

    v = tiny["parity"]
    fig = loss_figure(tiny)
    try:
        top, low = fig.axes
        bands = [c for c in low.collections if c.get_label().startswith("bf16 noise band")]
        assert len(bands) == 1, [c.get_label() for c in low.collections]
        ys = [y for path in bands[0].get_paths() for _, y in path.vertices]
        half = 100 * v["t_critical"] * v["noise"]
        assert (min(ys), max(ys)) == pytest.approx((-half, half)), (min(ys), max(ys), half)
        title = top.get_title().replace("\n", " ")
        assert "FP8 emulated on CPU: no speed figure" in title and "speedup" not in title, title
        assert "measurably different" in title and "budget:" in title, title
    finally:
        plt.close(fig)


def test_tail_gap_is_the_relative_difference_of_the_last_tenth():
    k, b, f, gap = tail_gap([9.0] * 18 + [2.0, 2.0], [9.0] * 18 + [2.0, 2.2])
    assert (k, b, f) == (2, 2.0, 2.1)
    assert gap == pytest.approx(0.05)
    assert math.isnan(tail_gap([1.0, 1.0], [1.0, None])[3])  # a diverged run has no gap
    with pytest.raises(ValueError, match="baseline, fp8"):
        tail_gap([1.0], [1.0, 2.0])


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_fp8ref_emulation_and_torchao_agree_on_the_first_step(recipe):
    """The same recipe through torchao (torch._scaled_mm) and through fp8ref's emulation: same
    weights, same batch, so step 1's losses agree to bf16 rounding, and both differ from bf16."""
    runs = {
        b: compare(FinetuneConfig(preset="tiny", backend=b, recipe=recipe, steps=1, noise_runs=0))
        for b in ("torchao", "fp8ref")
    }
    ao, ref = runs["torchao"]["runs"]["fp8"]["losses"][0], runs["fp8ref"]["runs"]["fp8"]["losses"][0]
    bf16 = runs["torchao"]["runs"]["bf16"]["losses"][0]
    assert ao == pytest.approx(ref, rel=2e-3)
    assert runs["fp8ref"]["model"]["fp8_linears"] == runs["torchao"]["model"]["fp8_linears"]
    assert ref != bf16


@pytest.mark.needs("torchao")
def test_gradient_checkpointing_recomputes_the_same_losses():
    """Checkpointing only recomputes activations: the same arithmetic, so the same loss curve in
    both runs (FP8 included: the recomputed forward casts the same tensors the same way)."""
    plain = compare(FinetuneConfig(preset="tiny", steps=2, noise_runs=0))
    ckpt = compare(FinetuneConfig(preset="tiny", steps=2, noise_runs=0, grad_checkpointing=True))
    for label in ("bf16", "fp8"):
        assert ckpt["runs"][label]["checkpointing"] and not plain["runs"][label]["checkpointing"], label
        assert ckpt["runs"][label]["losses"] == plain["runs"][label]["losses"], label
