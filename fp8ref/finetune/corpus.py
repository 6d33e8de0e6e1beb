"""The embedded training corpus: a small stochastic grammar of English-like sentences, generated
deterministically, whose entropy rate is known exactly, so a language model trained on it has a
known loss floor (no model can average below it, and a run that does has a bug such as leaked
labels).

The grammar is a *unifilar* stochastic finite-state machine: from each state every word is
distinct and leads to one next state, so the byte stream determines the word sequence and the
states. Its entropy rate is then ``sum_s pi(s) H(word | s)`` nats per word (``pi`` the stationary
distribution of the state chain) and, dividing by the mean number of tokens per word, nats per
token (Cover & Thomas, *Elements of Information Theory*, ch. 4; the renewal-reward ratio of two
stationary means). Tokens are bytes plus one end-of-document token, so the same arithmetic gives
the floor of a byte-level model's cross-entropy loss.

``documents(n_tokens, seed)`` yields the corpus; ``grammar_dataset`` serves it through
``datasets``; ``ByteTokenizer`` and ``pack`` turn any text dataset into fixed batches.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ..reference.validate import instance, integer, positive_int

__all__ = ["GRAMMAR", "Grammar", "ByteTokenizer", "documents", "grammar_dataset", "pack"]

# Lexicon by word class. Weights within a class fall off as 1/rank (a Zipf-like shape).
_DET = ["the", "a", "every", "no", "some", "this", "that", "each"]
_ADJ = [
    "small",
    "red",
    "old",
    "quiet",
    "bright",
    "heavy",
    "green",
    "young",
    "cold",
    "round",
    "dark",
    "soft",
    "tall",
    "warm",
    "strange",
    "empty",
]
_NOUN = [
    "cat",
    "dog",
    "river",
    "house",
    "tree",
    "bird",
    "child",
    "stone",
    "road",
    "garden",
    "window",
    "teacher",
    "boat",
    "letter",
    "mountain",
    "city",
    "horse",
    "book",
    "farmer",
    "door",
    "cloud",
    "engine",
    "song",
    "field",
    "bridge",
    "lamp",
    "market",
    "wolf",
    "ship",
    "candle",
    "island",
    "clock",
]
_VERB_T = [
    "sees",
    "follows",
    "finds",
    "carries",
    "watches",
    "builds",
    "remembers",
    "paints",
    "hears",
    "pushes",
    "likes",
    "opens",
    "crosses",
    "keeps",
    "answers",
    "visits",
]
_VERB_I = ["sleeps", "waits", "falls", "sings", "shines", "runs", "breaks", "stays"]
_PREP = ["near", "under", "behind", "with", "beside", "over", "across", "inside"]

EOS = "<eos>"  # end of document: one token, not text


def _zipf(words: list[str], total: float) -> list[tuple[str, float]]:
    w = [1.0 / (i + 1) for i in range(len(words))]
    s = sum(w)
    return [(word, total * x / s) for word, x in zip(words, w)]


@dataclasses.dataclass(frozen=True)
class Grammar:
    """``rules[state] = [(word, probability, next_state), ...]`` (probabilities sum to 1);
    ``bare`` lists the states whose words are written without a leading space (sentence starts)."""

    rules: dict
    start: str
    bare: frozenset

    def __post_init__(self) -> None:
        for s, arcs in self.rules.items():
            words = [w for w, _, _ in arcs]
            if len(set(words)) != len(words):
                raise ValueError(f"rules[{s!r}]: a word appears twice (the grammar must be unifilar)")
            if abs(sum(p for _, p, _ in arcs) - 1.0) > 1e-12:
                raise ValueError(f"rules[{s!r}]: probabilities sum to {sum(p for _, p, _ in arcs)}, expected 1")
            for _, p, nxt in arcs:
                if p <= 0 or nxt not in self.rules:
                    raise ValueError(f"rules[{s!r}]: bad arc (p={p}, next={nxt!r})")

    def render(self, state: str, word: str) -> str:
        """The text a word adds from ``state`` (EOS adds none: the tokenizer appends its token)."""
        if word == EOS:
            return ""
        if word == ".":
            return ".\n"
        return word if state in self.bare else " " + word

    def tokens(self, state: str, word: str) -> int:
        """How many byte-level tokens the word adds (EOS: its one token)."""
        return 1 if word == EOS else len(self.render(state, word).encode("utf-8"))

    def stationary(self) -> dict:
        """The stationary distribution of the state chain (float64 linear solve)."""
        states = list(self.rules)
        idx = {s: i for i, s in enumerate(states)}
        n = len(states)
        t = torch.zeros(n, n, dtype=torch.float64)
        for s, arcs in self.rules.items():
            for _, p, nxt in arcs:
                t[idx[s], idx[nxt]] += p
        # pi (T - I) = 0 with sum(pi) = 1: replace one equation by the normalization.
        a = (t - torch.eye(n, dtype=torch.float64)).T.clone()
        a[-1] = 1.0
        b = torch.zeros(n, dtype=torch.float64)
        b[-1] = 1.0
        pi = torch.linalg.solve(a, b)
        return {s: float(pi[idx[s]]) for s in states}

    def entropy_per_word(self) -> float:
        pi = self.stationary()
        return sum(pi[s] * -sum(p * math.log(p) for _, p, _ in arcs) for s, arcs in self.rules.items())

    def tokens_per_word(self) -> float:
        pi = self.stationary()
        return sum(pi[s] * sum(p * self.tokens(s, w) for w, p, _ in arcs) for s, arcs in self.rules.items())

    def loss_floor(self) -> float:
        """The entropy rate in nats per byte-level token: the least mean cross-entropy any model
        can reach on this corpus (a window's first tokens, with little context, only add to it)."""
        return self.entropy_per_word() / self.tokens_per_word()

    def walk(self, seed: int) -> Iterator[tuple[str, str]]:
        """An endless deterministic walk from ``start``: ``(state, word)`` pairs. Uses
        ``random.Random(seed)``, whose stream Python keeps stable across versions."""
        integer(seed, "seed")
        rng = random.Random(seed)
        table = {
            s: ([w for w, _, _ in arcs], list(_cumulative([p for _, p, _ in arcs])), {w: nxt for w, _, nxt in arcs})
            for s, arcs in self.rules.items()
        }
        state = self.start
        while True:
            words, cum, nxt = table[state]
            word = rng.choices(words, cum_weights=cum)[0]
            yield state, word
            state = nxt[word]


def _cumulative(ps: list[float]) -> Iterator[float]:
    acc = 0.0
    for p in ps:
        acc += p
        yield acc


def _build_grammar() -> Grammar:
    # Sentence: NP VP ("." | PREP NP ... | "and" VP); NP: DET ADJ* NOUN. Two sentence-start states:
    # "doc" (a document's first sentence) and "sent" (later ones, which may end the document).
    def np_states(prefix: str, after: str, p_adj: float) -> dict:
        return {
            f"{prefix}_det": [(w, p, f"{prefix}_adj") for w, p in _zipf(_DET, 1.0)],
            f"{prefix}_adj": (
                [(w, p, f"{prefix}_adj") for w, p in _zipf(_ADJ, p_adj)]
                + [(w, p, after) for w, p in _zipf(_NOUN, 1.0 - p_adj)]
            ),
        }

    rules = {
        "doc": [(w, p, "subj_adj") for w, p in _zipf(_DET, 1.0)],
        "sent": [(EOS, 0.2, "doc")] + [(w, p, "subj_adj") for w, p in _zipf(_DET, 0.8)],
        "verb": (
            [(w, p, "obj_det") for w, p in _zipf(_VERB_T, 0.6)] + [(w, p, "clause") for w, p in _zipf(_VERB_I, 0.4)]
        ),
        "clause": ([(".", 0.6, "sent"), ("and", 0.12, "verb")] + [(w, p, "pp_det") for w, p in _zipf(_PREP, 0.28)]),
    }
    rules["subj_adj"] = np_states("subj", "verb", 0.3)["subj_adj"]
    rules.update(np_states("obj", "clause", 0.25))
    rules.update(np_states("pp", "clause", 0.2))
    return Grammar(rules=rules, start="doc", bare=frozenset({"doc", "sent"}))


GRAMMAR = _build_grammar()


def documents(n_tokens: int, seed: int = 0, grammar: Grammar = GRAMMAR) -> list[str]:
    """Whole documents of the grammar's walk from ``seed`` until at least ``n_tokens`` byte-level
    tokens (text bytes plus one EOS per document) have been produced."""
    positive_int(n_tokens, "n_tokens")
    docs: list[str] = []
    parts: list[str] = []
    count = 0
    for state, word in grammar.walk(seed):
        count += grammar.tokens(state, word)
        if word == EOS:
            docs.append("".join(parts))
            parts = []
            if count >= n_tokens:
                return docs
        else:
            parts.append(grammar.render(state, word))
    raise RuntimeError("the grammar's walk ended")  # (it never does: walk() is endless)


def grammar_dataset(n_tokens: int, seed: int = 0) -> Any:
    """The corpus as a ``datasets.Dataset`` with one ``text`` column (one row per document)."""
    import datasets

    return datasets.Dataset.from_dict({"text": documents(n_tokens, seed)})


class ByteTokenizer:
    """UTF-8 bytes as token ids 0-255, plus ``eos_token_id`` 256. ``vocab_size`` is padded to a
    multiple of 16 so embedding and head shapes stay friendly to FP8 GEMMs."""

    eos_token_id = 256
    vocab_size = 272

    def encode(self, text: str) -> list[int]:
        instance(text, str, "text", "a str")
        return list(text.encode("utf-8"))

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def pack(
    texts: Iterable[str], encode: Callable[[str], list[int]], eos_token_id: int, steps: int, batch: int, seq_len: int
) -> torch.Tensor:
    """Concatenate ``encode(text) + [eos]`` per document, in order, and cut the stream into
    ``steps`` batches of ``batch`` rows of ``seq_len`` tokens: an int64 tensor
    ``(steps, batch, seq_len)``. Raises ValueError when the texts run out first."""
    for name, v in (("steps", steps), ("batch", batch), ("seq_len", seq_len)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    need = steps * batch * seq_len
    out = torch.empty(need, dtype=torch.int64)
    n = 0
    for text in texts:
        ids = list(encode(text)) + [eos_token_id]
        take = min(len(ids), need - n)
        out[n : n + take] = torch.tensor(ids[:take], dtype=torch.int64)
        n += take
        if n == need:
            return out.view(steps, batch, seq_len)
    raise ValueError(f"texts: {n:,} tokens, fewer than the {need:,} that {steps} steps x {batch} x {seq_len} need")
