"""What each behaviour-profile key means, and what a change of it does to a training run: the rows'
form and the rules the upgrade report (``upgrade_report``) reads them by. The rows themselves are
the families' own (``<room>/meanings.py``, registered in ``families``); every key a profile can
hold must match one (``tests/cpu/tools/test_key_meanings.py`` fails naming a key without a row).

A key is explained only by the family that owns it (``families.owner_of``: the longest namespace a
family's ``OWNS`` names), so a family's row can never take another family's key. Within a family a
row's pattern is the key with ``*`` for a dotted part or the rest of one (``from_*``) and ``**``
(last) for the rest of the key; its texts may name the parts ``*`` matched as ``{1}``, ``{2}``, ...
The first of the family's rows that matches wins, so the specific rows come before the general
ones. Severity is what a change of the key can do:

- ``numerics``: it can silently change the numbers a training run computes (a cast that overflows
  to NaN instead of saturating, a scale rounded another way, a checkpoint that loses a field);
- ``refusal``: it changes which paths run and which are refused (a run that worked may now stop
  with an error, or a path that was refused now runs and is worth checking);
- ``cosmetic``: neither (a NaN's bit pattern, an error message's words, which kernel ran where
  the accumulator keys pin the numbers).

The one rule for a change's severity (``severity_of``), by what kind of value each side holds
(``value_kind``: an answer, refused, fails, absent, not installed): a change into or out of
refused, fails, absent or not installed is a ``refusal`` change (which paths run changed); a
change between two messages of the same kind is ``cosmetic`` (other words for the same state);
a change between two answers has the row's severity. No torch: ``python -m fp8ref diff`` reads
these rows.
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache

__all__ = [
    "SEVERITIES",
    "KeyMeaning",
    "all_meanings",
    "meaning_of",
    "describe",
    "severity_of",
    "is_refusal",
    "value_kind",
    "direction",
]

# most serious first: the report's order
SEVERITIES = {
    "numerics": "can silently change training numbers",
    "refusal": "change which paths run or are refused",
    "cosmetic": "change neither numbers nor which paths run",
}


@dataclasses.dataclass(frozen=True)
class KeyMeaning:
    pattern: str
    family: str
    meaning: str
    consequence: str
    severity: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity: expected one of {sorted(SEVERITIES)}, got {self.severity!r}")

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    pieces = pattern.split(".")
    if "**" in pieces[:-1]:
        raise ValueError(f"pattern {pattern!r}: '**' only as its last part")
    parts = ["(.+)" if p == "**" else "([^.]+)".join(re.escape(x) for x in p.split("*")) for p in pieces]
    return re.compile(r"\.".join(parts) + r"\Z")


_SRC = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64"}


def all_meanings() -> tuple[KeyMeaning, ...]:
    """Every family's rows, family by family in the registry's order."""
    from .families import FAMILIES

    return tuple(row for family in FAMILIES for row in family.meanings().MEANINGS)


def meaning_of(key: str) -> tuple[KeyMeaning, tuple[str, ...]] | None:
    """The first row of the owning family's (``families.owner_of``) that matches ``key``, with the
    parts its ``*`` matched; None when no family owns the key or none of its rows matches."""
    from .families import owner_of

    if not isinstance(key, str):
        raise TypeError(f"key: expected a profile key (str), got {type(key).__name__}")
    family = owner_of(key)
    for row in family.meanings().MEANINGS if family is not None else ():
        m = row.regex.match(key)
        if m:
            return row, m.groups()
    return None


def describe(row: KeyMeaning, parts: tuple[str, ...]) -> tuple[str, str]:
    """The row's meaning and consequence with the matched parts filled in (``{1}``, ...), dtype
    tags written out (bf16 -> bfloat16)."""
    names = {str(i + 1): _SRC.get(p, p) for i, p in enumerate(parts)}

    def fill(text: str) -> str:
        return re.sub(r"\{(\d+)\}", lambda m: names.get(m.group(1), m.group(0)), text)

    return fill(row.meaning), fill(row.consequence)


def value_kind(value: object) -> str:
    """What a profile value says: ``refused`` (the install declines: ``refused: ...``, ``crashed:
    ...``, an op refused on every dtype ``all refused``), ``fails`` (an error on an input it
    supports: ``fails: ...``), ``absent`` (the profile holds no such key), ``not installed``
    (``missing ...``, ``not installed``, ``not measured here: ...``) or ``answer`` (anything else)."""
    if not isinstance(value, str):
        return "answer"
    if value == "<absent>":
        return "absent"
    if value.startswith(("missing", "not installed", "not measured here")):  # (the last: fp8ref's own need)
        return "not installed"
    if value.startswith("fails"):
        return "fails"
    if value.startswith(("refused", "crashed")) or value == "all refused":
        return "refused"
    return "answer"


def is_refusal(value: object) -> bool:
    """A value that says the install has no answer (``value_kind`` other than ``answer``)."""
    return value_kind(value) != "answer"


def severity_of(row: KeyMeaning, old: object, new: object) -> str:
    """The severity of one key's change from ``old`` to ``new`` (the module docstring's rule):
    into or out of a non-answer, ``refusal``; two messages of one non-answer kind, ``cosmetic``;
    two answers, the row's severity."""
    a, b = value_kind(old), value_kind(new)
    if a != b:
        return "refusal"
    return row.severity if a == "answer" else "cosmetic"


_DIRECTIONS = {
    ("answer", "refused"): "now refused: a run that takes this path stops with the install's error",
    ("answer", "fails"): "now fails on an input it supports: a run that takes this path stops with an error",
    ("refused", "answer"): "now runs (refused before): a path worth checking, its numbers are new",
    ("fails", "answer"): "now runs (failed before): its numbers are new",
    ("answer", "absent"): "no longer reported: the probe's path or its package is gone",
    ("absent", "answer"): "newly reported: a path or package the other side did not have",
    ("answer", "not installed"): "not installed on the new side: its paths do not run there",
    ("not installed", "answer"): "installed on the new side: its paths run there",
}


def direction(old: object, new: object) -> str | None:
    """What a change of value kind means, read from ``old`` to ``new`` (``now refused: ...``),
    or None when both are of one kind."""
    a, b = value_kind(old), value_kind(new)
    if a == b:
        return None
    return _DIRECTIONS.get((a, b), f"{a} -> {b}")
