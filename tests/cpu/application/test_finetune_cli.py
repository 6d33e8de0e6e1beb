"""``python -m fp8ref finetune`` and its opt-in loaders, without a network: the JSON and PNG it
writes, and the one-line errors for a missing model directory, an unreachable hub or dataset,
an unknown dataset suffix."""

import json
import math
import os

import pytest
import torch

from fp8ref.finetune import (
    FinetuneConfig,
    ResourceUnavailable,
    compare,
)
from tests.common.beside import fp8ref_main_each, main_each_report

pytestmark = pytest.mark.needs("transformers", "datasets")


@pytest.mark.needs("torchao", "matplotlib")
def test_cli_writes_json_and_png(tmp_path, capsys):
    from fp8ref.__main__ import main

    prefix = tmp_path / "out" / "tiny"
    assert (
        main(
            ["finetune", "--preset", "tiny", "--steps", "4", "--noise-runs", "1", "--no-progress", "--out", str(prefix)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "speedup" in out and "tail loss gap" in out and "parity: FP8" in out and "from 2 bf16 runs" in out
    data = json.loads(prefix.with_suffix(".json").read_text())
    assert len(data["runs"]["bf16"]["losses"]) == len(data["runs"]["fp8"]["losses"]) == 4
    assert len(data["runs"]["bf16~1"]["losses"]) == 4 and data["parity"]["bf16_runs"] == 2
    assert prefix.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_cli_missing_model_directory_is_a_clear_error(capsys):
    from fp8ref.__main__ import main

    assert main(["finetune", "--model", "./no-such-model-dir", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "Traceback" not in err


def run_beside(folder):
    """The CLI asked for hub resources with the hub unreachable by construction (offline mode, set
    before anything imports huggingface_hub, and an empty cache), so no test touches the network on
    any machine. One interpreter, run beside the tests (tests/plugins/beside.py), runs both commands (the
    imports are most of the cost)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(folder / "hf")}
    calls = {
        "model": ["finetune", "--no-progress", "--model", "Qwen/Qwen3-4B"],
        "wikitext": ["finetune", "--no-progress", "--dataset", "wikitext"],
    }
    return {"offline": (fp8ref_main_each(calls), {"env": env, "cwd": folder})}


@pytest.fixture
def offline_cli(beside):
    def result(name: str) -> tuple[int, str]:
        code, err, _ = main_each_report(beside("offline"))["calls"][name]
        return code, err

    return result


def test_cli_unreachable_hub_model_is_a_clear_error(offline_cli):
    code, err = offline_cli("model")
    assert code == 2, err[-2000:]
    assert "could not be loaded" in err and "model hub" in err and "Traceback" not in err


def test_cli_unreachable_wikitext_is_a_clear_error(offline_cli):
    code, err = offline_cli("wikitext")
    assert code == 2, err[-2000:]
    assert "could not be loaded" in err and "dataset hub" in err and "Traceback" not in err


def _byte_level_tokenizer():
    """A transformers tokenizer with one token per byte and an EOS, built locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    vocab["<eos>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


@pytest.mark.needs("torchao")
def test_opt_in_loaders_on_a_local_model_directory_and_text_file(tmp_path):
    """--model DIR and --dataset FILE go through AutoModelForCausalLM, AutoTokenizer and
    datasets.load_dataset, exercised on a model and a text file made here."""
    from fp8ref.finetune import preset_model
    from fp8ref.finetune.corpus import ByteTokenizer, documents

    cfg = FinetuneConfig(preset="tiny", steps=4, seq_len=32, batch=2, lr=3e-3).resolved()
    model = preset_model(cfg, ByteTokenizer.vocab_size)
    model.save_pretrained(tmp_path / "model")
    _byte_level_tokenizer().save_pretrained(tmp_path / "model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(documents(4_000, seed=9)))
    with torch.no_grad():
        saved = float(sum(p.double().sum() for p in model.parameters()))

    res = compare(
        FinetuneConfig(
            model=str(tmp_path / "model"), dataset=str(corpus), steps=4, seq_len=32, batch=2, lr=3e-3, noise_runs=0
        )
    )
    assert res["model"]["source"] == str(tmp_path / "model")
    assert res["runs"]["bf16"]["init_checksum"] == pytest.approx(saved, rel=1e-9)
    assert res["data"]["loss_floor"] is None  # a text file's entropy is unknown
    assert res["data"]["tokens_per_step"] == 64
    assert all(math.isfinite(x) for x in res["runs"]["fp8"]["losses"])


@pytest.mark.needs("torchao", "accelerate", "safetensors")
def test_a_fine_tune_starts_from_an_fp8_block_checkpoint_on_disk(tmp_path):
    """--model DIR of an FP8 block checkpoint (fp8ref's reference wrote its projections as E4M3 in
    128 x 128 blocks): both runs start from transformers' dequantization of it, which must be the
    reference's (the checksum of the weights trained from), and the report says what it loaded."""
    from fp8ref.finetune import preset_model
    from fp8ref.finetune.corpus import ByteTokenizer, documents
    from fp8ref.harness.hf import block_checkpoint

    cfg = FinetuneConfig(preset="tiny", steps=2, seq_len=32, batch=2, lr=3e-3).resolved()
    model = preset_model(cfg, ByteTokenizer.vocab_size)
    config = {**model.config.to_dict(), "torch_dtype": "bfloat16"}
    quantized = block_checkpoint.write(tmp_path / "model", config, model.state_dict())
    _byte_level_tokenizer().save_pretrained(tmp_path / "model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(documents(4_000, seed=9)))
    # the parameters trained from (a tied one once): the projections as the reference dequantizes them
    names = {id(p): n for n, p in model.named_parameters()}
    expected = float(
        sum(
            (quantized[n].dequantize(torch.bfloat16) if n in quantized else p.detach()).double().sum()
            for n, p in ((names[id(p)], p) for p in model.parameters())
        )
    )

    res = compare(
        FinetuneConfig(
            model=str(tmp_path / "model"), dataset=str(corpus), steps=2, seq_len=32, batch=2, lr=3e-3, noise_runs=0
        )
    )
    assert quantized, "the preset has no projection to quantize"
    source = res["model"]["source"]
    assert "FP8 block checkpoint" in source and "by transformers: definition" in source, source
    assert res["runs"]["bf16"]["init_checksum"] == pytest.approx(expected, rel=1e-9)


def test_unknown_local_dataset_suffix_is_a_value_error(tmp_path):
    bad = tmp_path / "data.bin"
    bad.write_bytes(b"\0")
    with pytest.raises(ValueError, match="dataset: a local file must end in"):
        FinetuneConfig(dataset=str(bad)).resolved()


def test_cli_unknown_dataset_is_a_clear_error(capsys):
    from fp8ref.__main__ import main

    assert main(["finetune", "--dataset", "no-such-corpus", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "dataset: expected 'grammar', 'wikitext' or an existing local file" in err


def test_resource_unavailable_is_raised_for_a_missing_directory():
    with pytest.raises(ResourceUnavailable, match="no such directory"):
        compare(FinetuneConfig(model="./definitely/not/here", steps=1))
