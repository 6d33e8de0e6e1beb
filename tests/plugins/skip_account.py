"""What a run did not check, counted by why: every skip's reason sorted into one of a few kinds,
so a reviewer sees at a glance whether a green run checked what it names (the section "What this
run did not check"). A skip of a kind not listed here is counted under "other" with its words."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

# (kind, the words of a skip reason of that kind): the first that matches wins
KINDS = (
    ("slow tier (--fp8-slow, --fp8-gpu-long)", re.compile(r"^(?:slow|gpu_long): ")),
    ("needs a GPU", re.compile(r"needs a CUDA GPU|needs sm\d+")),
    ("package not installed or not importable", re.compile(r"needs package |cannot import |imports torchao, which")),
    ("refused by the install", re.compile(r"cannot do .*: (?:refused|missing)|\brefused\b|: missing: ")),
    (
        "golden not compared (none to compare with, or pinned by this run)",
        re.compile(r"^no golden profile for |^(?:re-)?pinned .*; commit it"),
    ),
)
_SUBJECT = re.compile(r"cannot do (.*?): (?:[\w.]+: )?(?:refused|missing)")


def reason_of(report: Any) -> str:
    """A skip report's reason, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def kind_of(reason: str) -> str:
    return next((kind for kind, words in KINDS if words.search(reason)), "other")


def account(skipped: list[Any]) -> list[str]:
    """One line per kind with its count; for refusals the subjects refused (each once), for
    "other" the reasons themselves. Empty when nothing was skipped."""
    counts: Counter[str] = Counter()
    details: dict[str, dict[str, int]] = defaultdict(dict)
    for report in skipped:
        reason = reason_of(report)
        kind = kind_of(reason)
        counts[kind] += 1
        found = _SUBJECT.search(reason)
        detail = found.group(1) if kind == "refused by the install" and found else reason
        if kind in ("refused by the install", "other"):
            details[kind][detail] = details[kind].get(detail, 0) + 1
    lines = []
    for kind in [k for k, _ in KINDS] + ["other"]:
        if counts[kind]:
            lines.append(f"{kind}: {counts[kind]}")
            lines += [f"  {d}" + (f" (x{n})" if n > 1 else "") for d, n in sorted(details[kind].items())]
    return lines
