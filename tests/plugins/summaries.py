"""What a run observed, kept per run and printed at its end: implementation-defined outcomes
(``record_observation``), throughput rows (``record_throughput``), cast conformance reports
(``record_cast_report``), the reference's own comparisons with the definition and with gfloat
(``record_oracle_report``) and the golden tests' comparisons (``record_golden``). Under
pytest-xdist each worker sends its share to the controller, so the sections read the same with and
without ``-n``. ``--fp8-report=PATH`` (fp8ref's pytest plugin, ``fp8ref.pytest_golden``) writes
the golden comparisons as upgrade reports and these sections after them
(``fp8ref.harness.profiles.run_report``); the plugin checks the run's output paths (the report,
and the golden ``--fp8-update-golden`` writes) when pytest configures, before it collects."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from fp8ref.harness.profiles.run_report import DEFECTS_TITLE, SKIPS_TITLE, write_run_report
from fp8ref.pytest_golden import REPORT_SECTIONS
from tests.plugins.skip_account import account

__all__ = ["DEFECTS_TITLE", "SKIPS_TITLE", "write_run_report", "defects", "defect_lines", "summarize_oracle_rows"]

_REPORTS_KEY = pytest.StashKey[list]()
_OBSERVED_KEY = pytest.StashKey[dict]()
_THROUGHPUT_KEY = pytest.StashKey[list]()
_ORACLE_KEY = pytest.StashKey[list]()
_SECTION_KEY = pytest.StashKey[dict]()
_DEFECT_KEY = pytest.StashKey[list[dict]]()
_UNCOMPARED_KEY = pytest.StashKey[list[str]]()
_WORKER_KEY = "fp8ref_sections"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPORTS_KEY] = []
    config.stash[_OBSERVED_KEY] = {}
    config.stash[_THROUGHPUT_KEY] = []
    config.stash[_ORACLE_KEY] = []
    config.stash[_SECTION_KEY] = {}
    config.stash[_DEFECT_KEY] = []
    config.stash[_UNCOMPARED_KEY] = []


@pytest.fixture
def record_section(request: pytest.FixtureRequest) -> Callable[[str, list[str]], None]:
    """``record_section(title, lines)``: an end-of-run section of its own (an account a test
    draws up, e.g. which native float8 ops ran and what checked them)."""

    def record(title: str, lines: list[str]) -> None:
        request.config.stash[_SECTION_KEY][title] = list(lines)

    return record


@pytest.fixture
def record_defect(request: pytest.FixtureRequest) -> Callable[[str, str, int], None]:
    """``record_defect(key, where, count)``: the install gave a named deviation's wrong answer
    (``fp8ref.harness.casts.deviations``, excused by the test) ``count`` times at ``where``. Such
    defects open the end-of-run report; ``--fp8-strict`` fails the run on any."""

    def record(key: str, where: str, count: int) -> None:
        from fp8ref.harness.casts.defects import defect

        if count:
            request.config.stash[_DEFECT_KEY].append(dataclasses.asdict(defect(key, where, count)))

    return record


@pytest.fixture
def record_not_compared(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``record_not_compared(line)``: golden keys a run left out (a package not usable on one side:
    ``not compared: 165 keys (torchao not installed in B)``), said in "What this run did not check"."""
    return request.config.stash[_UNCOMPARED_KEY].append


@pytest.fixture
def record_golden(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``record_golden(where, device, status, lines, now=None)``: keep a golden test's comparison
    (``golden.compare_with_golden``'s status and lines) for the run's report; when ``now`` (the
    profile compared) is given, a golden was read and the run writes ``--fp8-report``, its upgrade
    report against the golden (``fp8ref.pytest_golden.record_golden``)."""
    from fp8ref.pytest_golden import record_golden as record

    def keep(where: Any, device: str, status: str, lines: list[str], now: dict | None = None) -> None:
        record(request.config, where, device, status, lines, now)

    return keep


@pytest.fixture
def record_throughput(request: pytest.FixtureRequest) -> Callable[[dict], None]:
    """Keep a throughput row (dict with a 'name') for the end-of-session table."""
    return request.config.stash[_THROUGHPUT_KEY].append


@pytest.fixture
def record_observation(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """Note an implementation-defined outcome (key -> value) for the end-of-session summary."""

    def record(key: str, value: object) -> None:
        request.config.stash[_OBSERVED_KEY][key] = value

    return record


@pytest.fixture
def record_oracle_report(request: pytest.FixtureRequest) -> Callable[[Any], None]:
    """Keep one comparison of fp8ref with an oracle: a ``definition_check.DefinitionReport``."""

    def record(report: Any) -> None:
        fields = ("oracle", "fmt", "inputs", "mode", "compared", "mismatches")
        request.config.stash[_ORACLE_KEY].append({k: getattr(report, k) for k in fields})

    return record


@pytest.fixture
def record_cast_report(request: pytest.FixtureRequest) -> Callable[[Any], None]:
    """Keep a conformance.CastReport for the end-of-session summary."""
    return request.config.stash[_REPORTS_KEY].append


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("--fp8-strict", False) and not hasattr(config, "workerinput") and defects(config):
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # (--fp8-strict: see the defects section)
    if hasattr(config, "workerinput"):  # an xdist worker: hand the sections to the controller
        workeroutput = getattr(config, "workeroutput")  # noqa: B009 - pytest-xdist sets it on a worker's config
        workeroutput[_WORKER_KEY] = json.dumps(
            {
                "observed": config.stash[_OBSERVED_KEY],
                "throughput": config.stash[_THROUGHPUT_KEY],
                "reports": [dataclasses.asdict(r) for r in config.stash[_REPORTS_KEY]],
                "oracle": config.stash[_ORACLE_KEY],
                "sections": config.stash[_SECTION_KEY],
                "defects": config.stash[_DEFECT_KEY],
                "not_compared": config.stash[_UNCOMPARED_KEY],
            },
            default=str,
        )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: merge a finished worker's sections into its own."""
    data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if not data:
        return
    from fp8ref.harness.casts.conformance import CastReport

    sections = json.loads(data)
    config = node.config
    config.stash[_OBSERVED_KEY].update(sections["observed"])
    config.stash[_THROUGHPUT_KEY].extend(sections["throughput"])
    config.stash[_ORACLE_KEY].extend(sections.get("oracle", []))
    config.stash[_SECTION_KEY].update(sections.get("sections", {}))
    config.stash[_DEFECT_KEY].extend(sections.get("defects", []))
    config.stash[_UNCOMPARED_KEY].extend(sections.get("not_compared", []))
    config.stash[_REPORTS_KEY].extend(CastReport(**r) for r in sections["reports"])


def defects(config: pytest.Config) -> list[dict]:
    """The defects this run met (``record_defect``'s, and the deviations the cast reports counted),
    one per deviation and place, most severe first."""
    from fp8ref.harness.casts.defects import SEVERITIES, defect

    found = [*config.stash.get(_DEFECT_KEY, [])]
    for r in config.stash.get(_REPORTS_KEY, []):
        if not r.impl.startswith("torch"):  # (an oracle's wrong answer is fp8ref's concern, not the install's)
            continue
        found += [
            dataclasses.asdict(defect(k, f"{r.impl} {r.fmt} {r.inputs}", n)) for k, n in r.deviations.items() if n
        ]
    merged: dict[tuple[str, str], dict] = {}
    for d in found:
        seen = merged.setdefault((d["key"], d["where"]), dict(d, count=0))
        seen["count"] += d["count"]
    return sorted(merged.values(), key=lambda d: (SEVERITIES.index(d["severity"]), d["key"], d["where"]))


def defect_lines(found: list[dict], strict: bool) -> list[str]:
    """The defects section: one line per deviation and place, then each deviation's words and
    versions once."""
    from fp8ref.harness.stack.install import installed_version, versions_line

    stack = versions_line() + "".join(
        f", {pkg} {v}" for pkg in ("transformers",) if (v := installed_version(pkg)) is not None
    )
    lines = [
        f"{len(found)} known wrong answer{'' if len(found) == 1 else 's'} on {stack}"
        + (" (--fp8-strict: the run fails on them)" if strict else " (--fp8-strict fails the run on them)")
    ]
    lines += [f"[{d['severity']}] {d['key']}: {d['where']}, {d['count']:,} excused" for d in found]
    for key in dict.fromkeys(d["key"] for d in found):
        d = next(x for x in found if x["key"] == key)
        lines += [f"{key}: {d['consequence']}", f"  what: {d['what']}", f"  seen: {d['seen']}"]
    return lines


def _sections(config: pytest.Config) -> list[tuple[str, list[str]]]:
    """The end-of-run sections (title, lines), in the order they are printed: the install's
    defects first."""
    out = []
    found = defects(config)
    if found:
        out.append((DEFECTS_TITLE, defect_lines(found, bool(config.getoption("--fp8-strict", False)))))
    observed = config.stash.get(_OBSERVED_KEY, {})
    if observed:
        out.append(("FP8 behaviour observed on this install", [f"{k}: {observed[k]}" for k in sorted(observed)]))
    rows = config.stash.get(_THROUGHPUT_KEY, [])
    if rows:
        lines = []
        for r in sorted(rows, key=lambda r: r["name"]):  # one order whichever process ran them
            extra = "  ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items() if k != "name"
            )
            lines.append(f"{r['name']}: {extra}")
        out.append(("FP8 throughput (same-run ratios)", lines))
    reports = config.stash.get(_REPORTS_KEY, [])
    if reports:
        from fp8ref.harness.casts.conformance import summarize_reports

        out.append(("FP8 cast conformance (observed on this install)", summarize_reports(reports)))
    oracle_rows = config.stash.get(_ORACLE_KEY, [])
    if oracle_rows:
        out.append(("fp8ref against the definition and gfloat", summarize_oracle_rows(oracle_rows)))
    out += sorted(config.stash.get(_SECTION_KEY, {}).items())
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    skipped = account(reporter.stats.get("skipped", [])) if reporter is not None else []
    recorded: list[str] = [*config.stash.get(_UNCOMPARED_KEY, [])]
    uncompared = [f"golden profile: {line}" for line in dict.fromkeys(recorded)]
    if skipped or uncompared:
        out.append((SKIPS_TITLE, skipped + uncompared))
    return out


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    sections = _sections(config)
    for title, lines in sections:
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
    config.stash[REPORT_SECTIONS] = sections  # (--fp8-report: fp8ref's plugin writes them after the golden's)
    found = defects(config) if config.getoption("--fp8-strict", False) and not hasattr(config, "workerinput") else []
    if found:
        terminalreporter.write_line(
            f"fp8ref --fp8-strict: this run fails on {len(found)} known wrong answers of the install "
            f"(the section '{DEFECTS_TITLE}' above), whatever the count of passed tests below says",
            red=True,
            bold=True,
        )


def summarize_oracle_rows(rows: list[dict]) -> list[str]:
    """Per oracle: formats x input classes x modes and the inputs compared, then one line per
    format with its classes' counts."""
    lines = []
    for oracle in sorted({r["oracle"] for r in rows}):
        mine = [r for r in rows if r["oracle"] == oracle]
        fmts = sorted({r["fmt"] for r in mine})
        classes = sorted({r["inputs"] for r in mine})
        modes = sorted({r["mode"] for r in mine})
        compared = sum(r["compared"] for r in mine)
        bad = sum(r["mismatches"] for r in mine)
        lines.append(
            f"{oracle}: {len(fmts)} formats x {len(classes)} input classes x {len(modes)} modes, "
            f"{compared:,} inputs compared, {bad} mismatches"
        )
        for fmt in fmts:
            per: dict[str, int] = {}
            for r in mine:
                if r["fmt"] == fmt:
                    per[r["inputs"]] = per.get(r["inputs"], 0) + r["compared"]
            counts = ", ".join(f"{k} {v:,}" for k, v in sorted(per.items()))
            lines.append(f"  {fmt:9s} {counts}")
    return lines
