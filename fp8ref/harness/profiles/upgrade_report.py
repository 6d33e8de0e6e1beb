"""The upgrade report: two behaviour profiles' differences as a reviewer reads them, grouped by
family, each key with what it means, what its change does to a training run and how much that
matters (``key_meanings``), and the versions on both sides. Rendered as a Markdown table a
pull-request comment carries as it is, or as JSON that renders the same Markdown again.

``python -m fp8ref diff A B --format markdown|json`` prints it; ``pytest --fp8-report PATH`` writes
it for the golden test's differences. No torch.
"""

from __future__ import annotations

import json
from typing import Any

from .key_meanings import SEVERITIES, describe, meaning_of, severity_of
from .profile_file import diff, machine_dependent, same_value

__all__ = ["REPORT_VERSION", "build", "render_markdown", "render_json", "from_json"]

REPORT_VERSION = 1
_UNEXPLAINED = "unexplained"
_CELL = 100  # characters of a value shown in a Markdown cell (the JSON keeps it whole)
_VERSION_FIELDS = ("torch", "torchao", "ml_dtypes", "safetensors", "cuda", "device", "device_name", "cpu_amx")


def _side(name: str, profile: dict) -> dict:
    return {
        "name": name,
        "versions": {k: profile.get("versions", {}).get(k) for k in _VERSION_FIELDS},
        "keys": len(profile.get("behaviour", {})),
    }


def build(a: dict, b: dict, *, a_name: str = "A", b_name: str = "B", accepted: tuple[dict, str] | None = None) -> dict:
    """The report of ``a`` (e.g. the golden) against ``b`` (this install): one change per
    differing key (``profile_file.diff``) with its family, severity, meaning and consequence;
    ``accepted``: the named differences (key -> value, why) of ``golden.named_differences``, whose
    changes the report marks as accepted (the reason once, in ``accepted_why``) when ``b`` gives
    exactly that value. A
    key no row of ``key_meanings`` explains is reported as ``unexplained`` (severity numerics: it
    cannot be told harmless), never dropped."""
    for name, p in (("a", a), ("b", b)):
        if not isinstance(p, dict) or not isinstance(p.get("behaviour"), dict):
            raise ValueError(f"{name}: expected a behaviour profile (a dict with a 'behaviour' mapping)")
    named, why = accepted if accepted is not None else ({}, "")
    changes = []
    for key, old, new in diff(a, b):
        found = meaning_of(key)
        if found is None:
            family, severity = _UNEXPLAINED, "numerics"
            meaning = "no meaning is written for this key (fp8ref/harness/profiles/key_meanings.py)"
            consequence = "unknown: read the probe that writes it (fp8ref/harness/profiles/profile.py)"
        else:
            row, parts = found
            family, severity = row.family, severity_of(row, old, new)
            meaning, consequence = describe(row, parts)
        ok = key in named and same_value(key, named[key], new)
        changes.append(
            {
                "key": key,
                "family": family,
                "severity": severity,
                "a": old,
                "b": new,
                "meaning": meaning,
                "consequence": consequence,
                "accepted": ok,
            }
        )
    keys = sorted(set(a["behaviour"]) | set(b["behaviour"]))
    a_b = [(k, a["behaviour"].get(k), b["behaviour"].get(k)) for k in keys]
    not_compared = [{"key": k, "why": w} for k, x, y in a_b if x != y and (w := machine_dependent(k, a, b)) is not None]
    counts = {s: sum(c["severity"] == s for c in changes) for s in SEVERITIES}
    return {
        "fp8ref_report": REPORT_VERSION,
        "a": _side(a_name, a),
        "b": _side(b_name, b),
        "keys": len(keys),
        "counts": counts,
        "accepted": sum(c["accepted"] for c in changes),
        "accepted_why": why if any(c["accepted"] for c in changes) else None,
        "changes": changes,
        "not_compared": not_compared,
    }


def render_json(report: dict) -> str:
    return json.dumps(report, indent=1, sort_keys=True) + "\n"


def from_json(text: str) -> dict:
    """A report read back from ``render_json``'s text (ValueError when it is not one)."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("fp8ref_report") != REPORT_VERSION or "changes" not in data:
        raise ValueError(f"not an fp8ref upgrade report (expected fp8ref_report = {REPORT_VERSION} and changes)")
    return data


def _cell(value: Any, limit: int = _CELL) -> str:
    """A value in a Markdown table cell: its repr in a code span, cut at ``limit`` characters,
    pipes escaped (GitHub reads ``\\|`` inside a code span in a table as ``|``)."""
    text = value if isinstance(value, str) and value == "<absent>" else repr(value)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def _prose(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _who(side: dict) -> str:
    v = side["versions"]
    return f"torch {v.get('torch')}, torchao {v.get('torchao')} ({v.get('device')})"


def render_markdown(report: dict, level: int = 3) -> str:
    """The report as Markdown: a heading (of ``level``) with both installs, a versions table, the
    counts by severity, then one table per family (most serious first, a heading one level down),
    one row per changed key."""
    if not isinstance(level, int) or not 1 <= level <= 5:
        raise ValueError(f"level: expected a heading level 1-5, got {level!r}")
    a, b = report["a"], report["b"]
    out = [f"{'#' * level} FP8 behaviour: {_who(a)} -> {_who(b)}", ""]
    out += ["| | A | B |", "| --- | --- | --- |", f"| profile | {_prose(a['name'])} | {_prose(b['name'])} |"]
    for field in _VERSION_FIELDS:
        va, vb = a["versions"].get(field), b["versions"].get(field)
        if va is not None or vb is not None:
            out.append(f"| {field} | {_prose(va)} | {_prose(vb)} |")
    out.append("")
    changes, counts = report["changes"], report["counts"]
    if not changes:
        out.append(f"**No FP8 behaviour changed**: all {report['keys']} keys are the same.")
    else:
        said = ", ".join(f"{counts.get(s, 0)} {s} ({words})" for s, words in SEVERITIES.items())
        out.append(f"**{len(changes)} of {report['keys']} keys differ**: {said}.")
        if report.get("accepted"):
            out += ["", f"{report['accepted']} of them accepted on purpose: {_prose(report['accepted_why'])}"]
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    families: dict[str, list[dict]] = {}
    for change in changes:
        families.setdefault(change["family"], []).append(change)

    def order(item: tuple[str, list[dict]]) -> tuple[int, int, str]:
        family, rows = item
        return (min(rank[r["severity"]] for r in rows), -len(rows), family)

    for family, rows in sorted(families.items(), key=order):
        out += ["", f"{'#' * (level + 1)} {family} ({len(rows)})", ""]
        out += ["| severity | key | A | B | what it means | for training |", "| --- | --- | --- | --- | --- | --- |"]
        for r in sorted(rows, key=lambda r: (rank[r["severity"]], r["key"])):
            severity = f"**{r['severity']}**" if r["severity"] == "numerics" else r["severity"]
            if r.get("accepted"):
                severity += " (accepted)"
            out.append(
                f"| {severity} | `{r['key']}` | {_cell(r['a'])} | {_cell(r['b'])} | {_prose(r['meaning'])} "
                f"| {_prose(r['consequence'])} |"
            )
    if report.get("not_compared"):
        out += ["", "Not compared (a fact of the machine, not of the install):"]
        out += [f"- `{n['key']}` ({_prose(n['why'])})" for n in report["not_compared"]]
    return "\n".join(out) + "\n"
