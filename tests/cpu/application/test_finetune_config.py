"""The fine-tune comparison's configuration: bad fields raise naming the field, the presets have
their stated shapes, and what a CPU run defaults to."""

import pytest
import torch

from fp8ref.finetune import (
    FinetuneConfig,
    compare,
)

pytestmark = pytest.mark.needs("transformers", "datasets")


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("preset", "huge", "preset"),
        ("backend", "te", "backend"),
        ("recipe", "blockwise", "recipe"),  # an fp8ref recipe torchao's float8 training does not have
        ("steps", 0, "steps"),
        ("seq_len", 1, "seq_len"),
        ("lr", -1.0, "lr"),
        ("lr", float("nan"), "lr"),
        ("noise_runs", -1, "noise_runs"),
        ("fp8_budget", -0.1, "fp8_budget"),
        ("emulate", "yes", "emulate"),
        ("device", "tpu:0", "device"),
    ],
)
def test_bad_config_raises_naming_the_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        FinetuneConfig(**{field: value}).resolved()


def test_calibrate_needs_two_runs_for_a_spread():
    from fp8ref.finetune import calibrate

    with pytest.raises(ValueError, match="runs: expected an int >= 2"):
        calibrate(FinetuneConfig(preset="tiny"), 1)


def test_cpu_runs_emulate_torchao_gemms_by_default():
    assert FinetuneConfig(preset="tiny").resolved().emulate is True
    assert FinetuneConfig(preset="tiny", emulate=False).resolved().emulate is False


def test_compare_rejects_a_non_config():
    with pytest.raises(TypeError, match="cfg"):
        compare({"preset": "tiny"})


@pytest.mark.parametrize(
    "preset,params_millions", [("tiny", (0.35, 0.5)), ("small", (15, 25)), ("4b-shaped", (380, 440))]
)
def test_presets_have_their_stated_shapes(preset, params_millions):
    """Built on the meta device (no memory, no init): the parameter counts docs/finetune.md states, and
    for 4b-shaped the projection shapes of Qwen3-4B (hidden 2560, MLP 9728, 32 query and 8 KV
    heads of 128, from its config.json)."""
    from fp8ref.finetune import preset_model
    from fp8ref.finetune.corpus import ByteTokenizer

    with torch.device("meta"):
        model = preset_model(FinetuneConfig(preset=preset).resolved(), ByteTokenizer.vocab_size)
    n = sum(p.numel() for p in model.parameters()) / 1e6
    assert params_millions[0] <= n <= params_millions[1]
    if preset == "4b-shaped":
        layer = model.model.layers[0]
        shapes = {
            name: tuple(getattr(getattr(layer, part), name).weight.shape)
            for part, names in (
                ("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                ("mlp", ("gate_proj", "up_proj", "down_proj")),
            )
            for name in names
        }
        assert shapes == {
            "q_proj": (32 * 128, 2560),
            "k_proj": (8 * 128, 2560),
            "v_proj": (8 * 128, 2560),
            "o_proj": (2560, 32 * 128),
            "gate_proj": (9728, 2560),
            "up_proj": (9728, 2560),
            "down_proj": (2560, 9728),
        }
        assert len(model.model.layers) == 4
