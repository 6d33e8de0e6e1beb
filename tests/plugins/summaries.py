"""What a run observed, kept per run and printed at its end: implementation-defined outcomes
(``record_observation``), throughput rows (``record_throughput``), cast conformance reports
(``record_cast_report``) and the reference's own comparisons with the definition and with gfloat
(``record_oracle_report``). Under pytest-xdist each worker sends its share to the controller, so
the sections read the same with and without ``-n``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

_REPORTS_KEY = pytest.StashKey[list]()
_OBSERVED_KEY = pytest.StashKey[dict]()
_THROUGHPUT_KEY = pytest.StashKey[list]()
_ORACLE_KEY = pytest.StashKey[list]()
_WORKER_KEY = "fp8ref_sections"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPORTS_KEY] = []
    config.stash[_OBSERVED_KEY] = {}
    config.stash[_THROUGHPUT_KEY] = []
    config.stash[_ORACLE_KEY] = []


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: hand the sections to the controller
        workeroutput = getattr(config, "workeroutput")  # noqa: B009 - pytest-xdist sets it on a worker's config
        workeroutput[_WORKER_KEY] = json.dumps(
            {
                "observed": config.stash[_OBSERVED_KEY],
                "throughput": config.stash[_THROUGHPUT_KEY],
                "reports": [dataclasses.asdict(r) for r in config.stash[_REPORTS_KEY]],
                "oracle": config.stash[_ORACLE_KEY],
            },
            default=str,
        )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: merge a finished worker's sections into its own."""
    data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if not data:
        return
    from fp8ref.harness.conformance import CastReport

    sections = json.loads(data)
    config = node.config
    config.stash[_OBSERVED_KEY].update(sections["observed"])
    config.stash[_THROUGHPUT_KEY].extend(sections["throughput"])
    config.stash[_ORACLE_KEY].extend(sections.get("oracle", []))
    config.stash[_REPORTS_KEY].extend(CastReport(**r) for r in sections["reports"])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    observed = config.stash.get(_OBSERVED_KEY, {})
    if observed:
        terminalreporter.section("FP8 behaviour observed on this install")
        for key in sorted(observed):
            terminalreporter.write_line(f"{key}: {observed[key]}")
    rows = config.stash.get(_THROUGHPUT_KEY, [])
    if rows:
        terminalreporter.section("FP8 throughput (same-run ratios)")
        for r in sorted(rows, key=lambda r: r["name"]):  # one order whichever process ran them
            extra = "  ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items() if k != "name"
            )
            terminalreporter.write_line(f"{r['name']}: {extra}")
    reports = config.stash.get(_REPORTS_KEY, [])
    if reports:
        from fp8ref.harness.conformance import summarize_reports

        terminalreporter.section("FP8 cast conformance (observed on this install)")
        for line in summarize_reports(reports):
            terminalreporter.write_line(line)
    oracle_rows = config.stash.get(_ORACLE_KEY, [])
    if oracle_rows:
        terminalreporter.section("fp8ref against the definition and gfloat")
        for line in summarize_oracle_rows(oracle_rows):
            terminalreporter.write_line(line)


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
