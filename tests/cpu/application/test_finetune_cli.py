"""``python -m fp8ref finetune`` and its opt-in loaders, without a network: the JSON and PNG it
writes and the verdict it prints, nothing on a stderr that is not a terminal, and the one-line
errors for a missing model directory, an unreachable hub or dataset, an unknown dataset suffix,
and a local dataset file that is empty, malformed or holds too little text."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from fp8ref.finetune import (
    FinetuneConfig,
    ResourceUnavailable,
    compare,
)
from tests.common.beside import pytest_each, pytest_each_result

pytestmark = pytest.mark.needs("transformers", "datasets")


def test_cli_missing_model_directory_is_a_clear_error(capsys):
    from fp8ref.__main__ import main

    assert main(["finetune", "--model", "./no-such-model-dir", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "Traceback" not in err


# local dataset files the CLI must refuse in one line naming them, each with its case's words
BAD_DATASETS = {
    "empty": ("empty.txt", "", "the file is empty (0 bytes)"),
    "malformed": ("broken.jsonl", '{"text": "a cat sees a dog."}\n{"text": a dog\n', "not a readable jsonl file"),
    "blank": ("blank.txt", "\n   \n\n", "no text (its 3 rows of 'text' are all empty or blank)"),
    "short": ("short.txt", "the cat sleeps.\n", "fewer than the 2,048 that 2 steps x 8 x 128 need"),
}


def run_beside(folder):
    """The interpreter beside the tests that every module's ``pytest_each`` runs share
    (tests/plugins/beside.py) runs these commands (the imports are most of the cost), each call's
    stderr a file, not a terminal: the CLI asked for hub resources with the hub unreachable by
    construction (offline mode, set for that whole interpreter before anything imports
    huggingface_hub, and an empty cache), so no test touches the network on any machine; given
    local dataset files it cannot train on; and the tiny comparison as CI calls it, without
    --no-progress (a few steps, one thread: the queue's core)."""
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(folder / "hf"),
        "OMP_NUM_THREADS": "1",
    }
    calls = {
        "model": ["finetune", "--no-progress", "--model", "Qwen/Qwen3-4B"],
        "wikitext": ["finetune", "--no-progress", "--dataset", "wikitext"],
        "tiny": ["finetune", "--preset", "tiny", "--steps", "4", "--noise-runs", "1", "--out", str(folder / "tiny")],
    }
    for name, (file, text, _) in BAD_DATASETS.items():
        (folder / file).write_text(text)
        calls[name] = ["finetune", "--dataset", str(folder / file), "--steps", "2", "--noise-runs", "0", "--no-plot"]
    runs = {name: {"argv": argv, "fp8ref": True, "cwd": str(folder), "env": env} for name, argv in calls.items()}
    return {"offline": pytest_each(runs)}


@pytest.mark.needs("torchao", "matplotlib")
def test_cli_prints_nothing_on_a_stderr_that_is_not_a_terminal(offline_cli):
    """Progress bars only on a terminal: a CI log or a pipe gets none (18 KB a default run used to
    get), and a run that succeeds prints nothing there: neither through Python's sys.stderr nor
    straight to the process's piped stderr."""
    code, err = offline_cli("tiny")  # (err: all that reached the file descriptor 2 during the call)
    assert code == 0 and err == "", err[-2000:]


@pytest.mark.slow
@pytest.mark.needs("torchao", "matplotlib")
def test_the_cli_in_a_fresh_interpreter_prints_nothing_on_a_piped_stderr(tmp_path):
    """The run above shares an interpreter whose earlier runs imported transformers, datasets and
    torchao already: what their imports print in a fresh process (a deprecation, a pytree
    warning) reaches a new user's CI log, so one fresh process holds the whole stderr once."""
    import os
    import subprocess
    import sys

    from tests.common.paths import ROOT

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    argv = ["finetune", "--preset", "tiny", "--steps", "2", "--noise-runs", "0", "--out", str(tmp_path / "tiny")]
    done = subprocess.run(
        [sys.executable, "-m", "fp8ref", *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]


@pytest.mark.needs("torchao", "matplotlib")
def test_cli_writes_json_and_png(beside, offline_cli):
    assert offline_cli("tiny")[0] == 0
    argv = pytest_each_result(beside("offline"), "tiny").args
    prefix = Path(argv[argv.index("--out") + 1])
    data = json.loads(prefix.with_suffix(".json").read_text())
    assert len(data["runs"]["bf16"]["losses"]) == len(data["runs"]["fp8"]["losses"]) == 4
    assert len(data["runs"]["bf16~1"]["losses"]) == 4 and data["parity"]["bf16_runs"] == 2
    assert set(data["parity"]["statements"]) == {"difference", "budget"}, data["parity"]
    assert prefix.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture
def tiny_results(beside: Any, offline_cli: Any) -> dict:
    """The results JSON the command wrote for its 4-step tiny comparison (``run_beside``)."""
    assert offline_cli("tiny")[0] == 0
    argv = pytest_each_result(beside("offline"), "tiny").args
    return json.loads(Path(argv[argv.index("--out") + 1]).with_suffix(".json").read_text())


@pytest.mark.needs("torchao", "matplotlib")
def test_cli_prints_the_verdicts_two_statements_and_no_speed_figure(tiny_results, monkeypatch, tmp_path, capsys):
    """What the command prints for a tiny comparison (the 4-step one it wrote, not trained
    again): the speed note instead of a speedup, then the two statements as the JSON holds them."""
    from fp8ref.__main__ import main
    from fp8ref.finetune import train

    monkeypatch.setattr(train, "compare", lambda cfg, progress=None: tiny_results)
    assert main(["finetune", "--preset", "tiny", "--no-plot", "--out", str(tmp_path / "tiny")]) == 0
    out = capsys.readouterr().out.splitlines()
    statements = tiny_results["parity"]["statements"]
    assert statements["difference"] in out and statements["budget"] in out, (statements, out)
    runs = tiny_results["parity"]["bf16_runs"]
    assert statements["difference"].startswith("measured: FP8 ") and f"{runs} bf16 runs" in statements["difference"]
    assert statements["budget"].startswith("budget: |gap| ") and "budget is the tiny preset's" in statements["budget"]
    assert "speed: FP8 emulated on CPU: no speed figure" in out and not any("speedup" in line for line in out), out
    written = json.loads((tmp_path / "tiny.json").read_text())
    assert written["parity"]["statements"] == statements and written["speedup"] is None


@pytest.mark.needs("torchao", "matplotlib")
@pytest.mark.parametrize(
    "different,within,code", [(True, True, 0), (False, True, 0), (True, False, 1), (False, False, 1)]
)
def test_check_exits_1_only_outside_the_parity_bound(tiny_results, monkeypatch, tmp_path, different, within, code):
    """``--check`` keeps its documented meaning: exit 1 when FP8 is outside the parity bound;
    being measurably different from bf16 alone changes no exit code."""
    import copy

    from fp8ref.__main__ import main
    from fp8ref.finetune import train

    results = copy.deepcopy(tiny_results)
    results["parity"].update(different=different, within=within)
    monkeypatch.setattr(train, "compare", lambda cfg, progress=None: results)
    argv = ["finetune", "--check", "--no-plot", "--out", str(tmp_path / "tiny")]
    assert main(argv) == code, (different, within)


@pytest.fixture
def offline_cli(beside):
    def result(name: str) -> tuple[int, str]:
        done = pytest_each_result(beside("offline"), name)
        return done.returncode, done.stderr

    return result


def test_cli_unreachable_hub_model_is_a_clear_error(offline_cli):
    code, err = offline_cli("model")
    assert code == 2, err[-2000:]
    assert "could not be loaded" in err and "model hub" in err and "Traceback" not in err


def test_cli_unreachable_wikitext_is_a_clear_error(offline_cli):
    code, err = offline_cli("wikitext")
    assert code == 2, err[-2000:]
    assert "could not be loaded" in err and "dataset hub" in err and "Traceback" not in err


@pytest.mark.parametrize("case", list(BAD_DATASETS))
def test_cli_local_dataset_it_cannot_train_on_is_one_line_naming_the_file(offline_cli, case):
    """An empty, malformed, blank or too short local file: exit 2 and one ``error:`` line that
    names the file and what is wrong with it (a malformed one: the parser's own words), nothing
    else on stderr, and no word of a hub the file never came from."""
    file, _, words = BAD_DATASETS[case]
    code, err = offline_cli(case)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --dataset "), (code, err[-2000:])
    assert file in lines[0] and words in lines[0], lines[0]
    assert "hub" not in err and "Traceback" not in err, err


def test_cli_malformed_dataset_says_where_the_parser_stopped(offline_cli):
    _, err = offline_cli("malformed")
    assert "JSON parse error" in err and "row" in err, err


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
