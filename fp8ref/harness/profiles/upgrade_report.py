"""The upgrade report: two behaviour profiles' differences as a reviewer reads them, grouped by
family, each key with what it means, what its change does to a training run and how much that
matters (``key_meanings``), the direction of a change of state (``now refused``), each named
deviation explained, and the packages that differ between the two installs. Rendered as Markdown a
pull-request comment carries as it is (``render_markdown``: every row; ``render_summary``: the
counts and the most serious rows, always under ``SUMMARY_LIMIT`` characters), or as JSON that
renders the same Markdown again.

``python -m fp8ref diff A B --format markdown|summary|json`` prints it; ``pytest --fp8-report
PATH`` writes it for the golden test's differences. No torch.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .key_meanings import SEVERITIES, describe, direction, meaning_of, severity_of
from .profile_file import diff, first_divergence, machine_dependent, not_compared, same_value
from .stack_identity import STACK

__all__ = ["REPORT_VERSION", "SUMMARY_LIMIT", "build", "render_markdown", "render_summary", "render_json", "from_json"]

REPORT_VERSION = 2
SUMMARY_LIMIT = 60_000  # characters: a pull-request comment takes 65,536
_UNEXPLAINED = "unexplained"
_CELL = 100  # characters of a value shown in a Markdown cell (the JSON keeps it whole)
_VERSION_FIELDS = (*STACK, "cuda", "device", "device_name", "cpu_amx")
_DEVIATES = re.compile(r"deviates(?: on [\w ]+)?: ([\w ]+)")


def _side(name: str, profile: dict) -> dict:
    return {
        "name": name,
        "versions": {k: profile.get("versions", {}).get(k) for k in _VERSION_FIELDS},
        "keys": len(profile.get("behaviour", {})),
    }


def _deviations_named(*values: object) -> dict[str, str]:
    """Each named deviation a value names (``deviates: key ...``) with what it does to training
    (``fp8ref.harness.casts.defects``), or why it is not known."""
    from ..casts.defects import severity_of as deviation_severity

    out = {}
    for value in values:
        found = _DEVIATES.search(value) if isinstance(value, str) else None
        for key in found.group(1).split() if found else ():
            try:
                severity, consequence = deviation_severity(key)
                out[key] = f"{severity}: {consequence}"
            except KeyError:
                out[key] = "not a deviation this fp8ref names (fp8ref/harness/casts/deviations.py)"
    return out


def build(a: dict, b: dict, *, a_name: str = "A", b_name: str = "B", accepted: tuple[dict, str] | None = None) -> dict:
    """The report of ``a`` (e.g. the golden) against ``b`` (this install): one change per
    differing key (``profile_file.diff``) with its family, severity, meaning, consequence, the
    direction of a change of state, the deviations its values name and, for a key with traces on
    both sides, the call where they first part (``profile_file.first_divergence``); ``accepted``: the named
    differences (key -> value, why) of ``golden.accepted_differences``, whose changes the report marks
    as accepted (the reason once, in ``accepted_why``) when ``b`` gives exactly that value. A key
    no family's row explains (``key_meanings.meaning_of``) is reported as ``unexplained`` (severity numerics: it
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
            meaning = "no meaning is written for this key (its family's fp8ref/harness/<room>/meanings.py)"
            consequence = "unknown: read the probe that writes it (fp8ref/harness/<room>/profile_keys.py)"
        else:
            row, parts = found
            family, severity = row.family, severity_of(row, old, new)
            meaning, consequence = describe(row, parts)
        changes.append(
            {
                "key": key,
                "family": family,
                "severity": severity,
                "a": old,
                "b": new,
                "meaning": meaning,
                "consequence": consequence,
                "direction": direction(old, new),
                "deviations": _deviations_named(old, new),
                "accepted": key in named and same_value(key, named[key], new),
                "divergence": first_divergence(key, a, b),
            }
        )
    keys = sorted(set(a["behaviour"]) | set(b["behaviour"]))
    a_b = [(k, a["behaviour"].get(k), b["behaviour"].get(k)) for k in keys]
    machine = [{"key": k, "why": w} for k, x, y in a_b if x != y and (w := machine_dependent(k, a, b)) is not None]
    packages = [{"why": why, "keys": len(ks)} for why, ks in not_compared(a, b).items()]
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
        "not_compared": machine,
        "not_installed": packages,
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


def _prose(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _changed_versions(report: dict) -> list[str]:
    """The version fields that differ between the two sides, as ``field A -> B``."""
    a, b = report["a"]["versions"], report["b"]["versions"]
    out = []
    for field in (*STACK, "cuda"):
        va, vb = a.get(field), b.get(field)
        if va != vb:
            out.append(f"{field} {va or 'not installed'} -> {vb or 'not installed'}")
    return out


def _heading(report: dict, level: int) -> str:
    """``FP8 behaviour: torchao 0.17.0 -> 0.18.0, transformers not installed -> 5.24.0 (cpu)``:
    only what differs between the installs, plus the device kinds."""
    a, b = report["a"]["versions"], report["b"]["versions"]
    changed = _changed_versions(report)
    what = ", ".join(changed) if changed else f"the same versions (torch {a.get('torch')}, torchao {a.get('torchao')})"
    device = a.get("device") if a.get("device") == b.get("device") else f"{a.get('device')} -> {b.get('device')}"
    return f"{'#' * level} FP8 behaviour: {what} ({device})"


def _order(report: dict) -> list[tuple[str, list[dict]]]:
    """The families, most serious first, each with its rows most serious first."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    families: dict[str, list[dict]] = {}
    for change in report["changes"]:
        families.setdefault(change["family"], []).append(change)
    ordered = sorted(families.items(), key=lambda it: (min(rank[r["severity"]] for r in it[1]), -len(it[1]), it[0]))
    return [(f, sorted(rows, key=lambda r: (rank[r["severity"]], r["key"]))) for f, rows in ordered]


def _severity_cell(r: dict) -> str:
    cell = f"**{r['severity']}**" if r["severity"] == "numerics" else r["severity"]
    return cell + (" (accepted)" if r.get("accepted") else "")


def _counts_line(report: dict) -> str:
    changes, counts = report["changes"], report["counts"]
    said = ", ".join(f"{counts.get(s, 0)} {s} ({words})" for s, words in SEVERITIES.items())
    return f"**{len(changes)} of {report['keys']} keys differ**: {said}."


def _top(report: dict, level: int) -> list[str]:
    a, b = report["a"], report["b"]
    out = [_heading(report, level), ""]
    out += ["| | A | B |", "| --- | --- | --- |", f"| profile | {_prose(a['name'])} | {_prose(b['name'])} |"]
    for field in _VERSION_FIELDS:
        va, vb = a["versions"].get(field), b["versions"].get(field)
        if va is not None or vb is not None:
            out.append(f"| {field} | {_prose(va or 'not installed')} | {_prose(vb or 'not installed')} |")
    out.append("")
    if not report["changes"]:
        out.append(f"**No FP8 behaviour changed**: all {report['keys']} keys compared are the same.")
    else:
        out.append(_counts_line(report))
        if report.get("accepted"):
            out += ["", f"{report['accepted']} of them accepted on purpose: {_prose(report['accepted_why'])}"]
    return out


def _tail(report: dict) -> list[str]:
    out = []
    if report.get("not_installed"):
        out += ["", "Not compared (a package not usable on one side; its tests skip, naming it):"]
        out += [f"- {n['keys']} keys: {_prose(n['why'])}" for n in report["not_installed"]]
    if report.get("not_compared"):
        out += ["", "Not compared (a fact of the machine, not of the install):"]
        out += [f"- `{n['key']}` ({_prose(n['why'])})" for n in report["not_compared"]]
    return out


def render_markdown(report: dict, level: int = 3) -> str:
    """The report as Markdown: a heading (of ``level``) naming what differs between the installs,
    a versions table, the counts by severity, then one table per family (most serious first, a
    heading one level down), one row per changed key. A meaning or consequence that several rows
    of a family share is written once above its table; the named deviations the values cite are
    explained below it."""
    if not isinstance(level, int) or not 1 <= level <= 5:
        raise ValueError(f"level: expected a heading level 1-5, got {level!r}")
    out = _top(report, level)
    for family, rows in _order(report):
        out += ["", f"{'#' * (level + 1)} {family} ({len(rows)})", ""]
        texts = [r[field] for r in rows for field in ("meaning", "consequence")]
        shared = {t: i for i, t in enumerate(dict.fromkeys(t for t in texts if texts.count(t) > 1), start=1)}
        for t, i in shared.items():
            out.append(f"({i}) {_prose(t)}")
        if shared:
            out.append("")

        def once(text: str, shared: dict[str, int] = shared) -> str:  # a text rows share: its note's number
            return f"see ({shared[text]})" if text in shared else _prose(text)

        out += ["| severity | key | A | B | what it means | for training |", "| --- | --- | --- | --- | --- | --- |"]
        explained: dict[str, str] = {}
        diverged: dict[str, str] = {}
        for r in rows:
            meaning = once(r["meaning"])
            training = once(r["consequence"])
            if r.get("direction"):
                training = f"**{_prose(r['direction'])}**. {training}"
            explained |= r.get("deviations", {})
            if r.get("divergence"):
                diverged[r["key"]] = r["divergence"]
            out.append(
                f"| {_severity_cell(r)} | `{r['key']}` | {_cell(r['a'])} | {_cell(r['b'])} | {meaning} | {training} |"
            )
        if diverged:
            out += ["", "Where each traced program first diverges:"]
            out += [f"- `{k}`: {_prose(v)}" for k, v in sorted(diverged.items())]
        if explained:
            out += ["", "Named deviations in these values:"]
            out += [f"- `{k}`: {_prose(v)}" for k, v in sorted(explained.items())]
    out += _tail(report)
    return "\n".join(out) + "\n"


def render_summary(report: dict, level: int = 3, limit: int = SUMMARY_LIMIT, rows_per_family: int = 8) -> str:
    """The report for a pull-request comment: the heading, versions and counts, then per family
    its counts and its most serious rows (``rows_per_family``), values cut short; never more than
    ``limit`` characters (whole families are left out at the end, and the text says how many)."""
    if not isinstance(limit, int) or limit < 2_000:
        raise ValueError(f"limit: expected at least 2,000 characters, got {limit!r}")
    head = _top(report, level)
    tail = _tail(report)
    parts: list[str] = []
    left_out = 0
    budget = limit - len("\n".join(head + tail)) - 200
    for family, rows in _order(report):
        counts = ", ".join(f"{n} {s}" for s in SEVERITIES if (n := sum(r["severity"] == s for r in rows)))
        block = ["", f"{'#' * (level + 1)} {family} ({len(rows)}: {counts})", ""]
        for r in rows[:rows_per_family]:
            now = f" **{_prose(r['direction'])}**" if r.get("direction") else ""
            where = f"; first divergence: {_prose(r['divergence'])}" if r.get("divergence") else ""
            block.append(f"- {_severity_cell(r)} `{r['key']}`: {_cell(r['a'], 40)} -> {_cell(r['b'], 40)}{now}{where}")
        if len(rows) > rows_per_family:
            block.append(f"- ... and {len(rows) - rows_per_family} more (the full report: --format markdown)")
        text = "\n".join(block)
        if len(text) + 1 > budget:
            left_out += 1
            continue
        budget -= len(text) + 1
        parts.append(text)
    if left_out:
        parts.append(f"\n{left_out} more families left out to stay under {limit:,} characters: see the full report")
    return "\n".join([*head, *parts, *tail]) + "\n"
