"""A pytest run's report (``pytest --fp8-report=PATH``): each golden comparison of the run, as its
upgrade report (``upgrade_report``) when a golden was read, and the end-of-run sections a suite
adds (fp8ref's own: the install's defects first, then what it observed and what it did not
check). Markdown, or JSON when PATH ends in ``.json``; written whole or not at all
(``atomic``). The pytest plugin (``fp8ref.pytest_golden``) keeps the comparisons and writes it;
no pytest here."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["DEFECTS_TITLE", "SKIPS_TITLE", "golden_entry", "write_run_report"]

DEFECTS_TITLE = "Defects of this install: known wrong answers, excused by name"
SKIPS_TITLE = "What this run did not check (skips by reason)"


def golden_entry(
    where: str | Path, device: str, status: str, lines: list[str], now: dict | None = None, *, report: bool = False
) -> dict:
    """One golden comparison as the run's report keeps it (``golden.compare_with_golden``'s
    status and lines); with ``report``, when ``now`` (the profile compared) is given and a golden
    was read, its upgrade report against the golden (it reads the golden and its accepted
    differences again)."""
    from . import upgrade_report
    from .golden import accepted_differences, golden_path
    from .profile_file import load

    path = golden_path(where, device)
    built = None
    if report and now is not None and status in ("equal", "named", "differs"):
        accepted = accepted_differences(where, now, device)
        built = upgrade_report.build(load(path), now, a_name=str(path), b_name="this install", accepted=accepted)
    return {"device": device, "golden": str(path), "status": status, "lines": lines, "report": built}


def write_run_report(
    path: str, golden: list[dict], sections: list[tuple[str, list[str]]], exitstatus: int, summary: bool = False
) -> str:
    """The run's report at ``path`` (JSON when it ends in ``.json``, else Markdown), whole or not
    at all: the install's defects, each golden comparison (its upgrade report, or its status line
    when no golden was read), then the end-of-run sections. ``summary``: a pull-request comment,
    under ``upgrade_report.SUMMARY_LIMIT`` characters: each golden comparison's summary and, of the
    sections, only what this run did not check."""
    from . import upgrade_report
    from .atomic import write_text

    if str(path).endswith(".json"):
        data = {"fp8ref_run_report": 1, "exitstatus": exitstatus, "golden": golden, "sections": dict(sections)}
        return str(write_text(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"))
    out = ["## fp8ref: FP8 behaviour of this install", "", f"pytest exit status: {exitstatus}", ""]
    first = [s for s in sections if s[0] == DEFECTS_TITLE]  # the install's known wrong answers open it
    for title, lines in first:
        shown = lines if not summary or len(lines) <= 40 else [*lines[:40], f"... and {len(lines) - 40} more lines"]
        out += [f"### {title}", "", "```text", *shown, "```", ""]
    sections = [s for s in sections if s[0] != DEFECTS_TITLE]
    for entry in golden:
        out += [f"### Golden profile ({entry['device']}): `{entry['golden']}`, {entry['status']}", ""]
        if entry["report"] is not None:
            render = upgrade_report.render_summary if summary else upgrade_report.render_markdown
            out += [render(entry["report"], level=4)]
        else:
            out += [*entry["lines"], ""]
    if not golden:
        out += ["No golden test ran in this run.", ""]
    if summary:
        left = [title for title, _ in sections if title != SKIPS_TITLE]
        sections = [s for s in sections if s[0] == SKIPS_TITLE]
        if left:
            out += [f"{len(left)} more end-of-run sections in the full report (--fp8-report-format full).", ""]
    for title, lines in sections:
        out += [f"### {title}", "", "```text", *lines, "```", ""]
    text = "\n".join(out)
    if summary and len(text) > upgrade_report.SUMMARY_LIMIT:
        cut = "\n\n(cut here to stay under a pull-request comment's size: the full report has the rest)\n"
        text = text[: upgrade_report.SUMMARY_LIMIT - len(cut) - 8].rsplit("\n", 1)[0]
        if text.count("```") % 2:  # (an open code block closed, so the rest renders as text)
            text += "\n```"
        text += cut
    return str(write_text(path, text))
