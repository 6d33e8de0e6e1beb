"""The embedded corpus: deterministic, grammatical, and with the loss floor its generator implies.

The floor is checked against a Monte Carlo estimate from the generator's own walk (mean
-log p(word | state) per token over 300k words), which shares no arithmetic with the linear solve
in ``Grammar.stationary``."""

import itertools
import math

import pytest

from fp8ref.finetune.corpus import EOS, GRAMMAR, ByteTokenizer, Grammar, documents, grammar_dataset, pack


def _probs(g: Grammar) -> dict:
    return {s: {w: (p, nxt) for w, p, nxt in arcs} for s, arcs in g.rules.items()}


def test_loss_floor_matches_a_monte_carlo_estimate_of_the_entropy_rate():
    probs = _probs(GRAMMAR)
    nll = tokens = 0.0
    for state, word in itertools.islice(GRAMMAR.walk(seed=123), 300_000):
        nll -= math.log(probs[state][word][0])
        tokens += GRAMMAR.tokens(state, word)
    estimate = nll / tokens
    assert GRAMMAR.loss_floor() == pytest.approx(estimate, rel=0.01)
    # a floor far below ln(256) (the uniform byte model) and above zero: the corpus is learnable
    # but not trivial
    assert 0.2 < GRAMMAR.loss_floor() < 0.5 * math.log(256)


def test_stationary_distribution_matches_visit_frequencies():
    n = 200_000
    counts = {s: 0 for s in GRAMMAR.rules}
    for state, _ in itertools.islice(GRAMMAR.walk(seed=5), n):
        counts[state] += 1
    pi = GRAMMAR.stationary()
    assert sum(pi.values()) == pytest.approx(1.0, abs=1e-12)
    for s, p in pi.items():
        assert counts[s] / n == pytest.approx(p, abs=0.005), s


def test_documents_are_deterministic_and_seed_dependent():
    a, b, c = documents(20_000, seed=1), documents(20_000, seed=1), documents(20_000, seed=2)
    assert a == b
    assert a != c


def test_documents_hold_at_least_the_asked_tokens_counted_as_bytes_plus_eos():
    docs = documents(50_000, seed=0)
    total = sum(len(d.encode()) + 1 for d in docs)
    assert 50_000 <= total < 50_000 + 2_000  # stops at the first document end past the target
    assert all(d and d.endswith(".\n") for d in docs)


def _parse(doc: str, g: Grammar) -> None:
    """Walk the grammar along the document's words; fail on any word its state cannot emit."""
    probs = _probs(g)
    state = g.start
    for line in doc.splitlines():
        assert line.endswith("."), line
        for word in line[:-1].split(" ") + ["."]:
            assert word in probs[state], f"{word!r} cannot follow state {state!r} in {line!r}"
            state = probs[state][word][1]
    assert EOS in probs[state], f"document ends in state {state!r}, which cannot end a document"


def test_every_generated_document_parses_under_the_grammar():
    for doc in documents(30_000, seed=3):
        _parse(doc, GRAMMAR)


def test_grammar_rejects_a_non_unifilar_or_unnormalized_table():
    with pytest.raises(ValueError, match="appears twice"):
        Grammar(rules={"s": [("a", 0.5, "s"), ("a", 0.5, "s")]}, start="s", bare=frozenset())
    with pytest.raises(ValueError, match="sum to"):
        Grammar(rules={"s": [("a", 0.5, "s"), ("b", 0.4, "s")]}, start="s", bare=frozenset())
    with pytest.raises(ValueError, match="bad arc"):
        Grammar(rules={"s": [("a", 1.0, "t")]}, start="s", bare=frozenset())


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="n_tokens"):
        documents(0)
    with pytest.raises(TypeError, match="seed"):
        next(GRAMMAR.walk(seed="1"))
    with pytest.raises(TypeError, match="text"):
        ByteTokenizer().encode(b"bytes")
    with pytest.raises(ValueError, match="seq_len"):
        pack(["a"], ByteTokenizer().encode, 256, steps=1, batch=1, seq_len=0)


def test_byte_tokenizer_round_trips_and_keeps_eos_outside_the_bytes():
    tok = ByteTokenizer()
    text = "the cat sees a dog.\n"
    ids = tok.encode(text)
    assert ids == list(text.encode())
    assert tok.decode(ids + [tok.eos_token_id]) == text
    assert tok.eos_token_id >= 256 and tok.vocab_size > tok.eos_token_id and tok.vocab_size % 16 == 0


def test_pack_keeps_document_order_with_eos_between_and_fails_when_short():
    tok = ByteTokenizer()
    docs = ["ab.\n", "cde.\n", "f.\n"]
    out = pack(docs, tok.encode, tok.eos_token_id, steps=2, batch=1, seq_len=6)
    stream = [i for d in docs for i in tok.encode(d) + [tok.eos_token_id]]
    assert out.shape == (2, 1, 6)
    assert out.flatten().tolist() == stream[:12]
    with pytest.raises(ValueError, match="fewer than"):
        pack(docs, tok.encode, tok.eos_token_id, steps=3, batch=2, seq_len=6)


@pytest.mark.needs("datasets")
def test_grammar_dataset_serves_the_documents_through_datasets():
    import datasets

    ds = grammar_dataset(5_000, seed=4)
    assert isinstance(ds, datasets.Dataset)
    assert ds.column_names == ["text"]
    assert ds["text"] == documents(5_000, seed=4)
