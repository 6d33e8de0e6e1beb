"""The default tier's cost account: what a run spent, per test family, per profile family and per
process beside the run, as the markdown table ``--fp8-durations`` prints and
``scripts/timings.py`` writes into docs/timings.md. Only arithmetic and text here (no pytest, no
torch), so a run with known durations gives a known table (tests/cpu/tools/test_cost_account.py).

A test family is the test's folder (``tests/cpu/install``, ``tests/meta``, ...: tests/README.md
says what each holds); a profile family is a room of ``fp8ref/harness/profiles/families.py``."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

__all__ = ["CompileCounter", "Run", "family_of", "module_of", "render"]

_WHENS = ("setup", "call", "teardown")


def module_of(nodeid: str) -> str:
    """``tests/cpu/tools/test_cli.py::test_x[a]`` -> ``tests/cpu/tools/test_cli.py``."""
    return nodeid.split("::", 1)[0]


def family_of(path: str) -> str:
    """A test module's (or node id's) family: its folder (``tests/cpu/tools``)."""
    module = module_of(path)
    return module.rsplit("/", 1)[0] if "/" in module else "."


@dataclasses.dataclass
class Run:
    """What a run spent. ``phases``: (node id, "setup" | "call" | "teardown", seconds);
    ``collections``: (module path, seconds to collect it); ``profile``: (family, seconds) for
    each family of each profile collected in the pytest process; ``processes``: (name, started
    at, wall, cpu, exit code), wall/cpu/code None when unknown; ``wall``: the session's seconds;
    ``cpu``: the pytest process's CPU seconds and its children's; ``load``: the 1-minute load
    average at the start and the end; ``versions``: a line (torch, Python); ``compiles``: (node
    id, graphs inductor compiled, graphs it loaded from its FX graph cache) for each test that
    did either, in the pytest process; None when not counted (pytest-xdist's controller)."""

    phases: list[tuple[str, str, float]] = dataclasses.field(default_factory=list)
    collections: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    profile: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    processes: list[tuple[str, float, float | None, float | None, int | None]] = dataclasses.field(default_factory=list)
    wall: float = 0.0
    cpu: tuple[float, float] = (0.0, 0.0)
    load: tuple[float, float] = (0.0, 0.0)
    versions: str = ""
    compiles: list[tuple[str, int, int]] | None = dataclasses.field(default_factory=list)


class CompileCounter:
    """Inductor's running counts (graphs compiled, graphs loaded from its cache) turned into what
    each test phase added. ``source`` is the object holding the counts: ``counters.clear()`` (the
    ``fresh_dynamo`` fixture clears them around a compiled test) throws it away, so a new one
    means everything it holds is new, whichever way each count moved. A count that went down
    under the same object was cleared too."""

    def __init__(self) -> None:
        self._last = (0, 0)
        self._source: object = None

    def step(self, now: tuple[int, int], source: object = None) -> tuple[int, int]:
        cleared = source is not self._source or any(n < last for n, last in zip(now, self._last))
        added = now if cleared else (now[0] - self._last[0], now[1] - self._last[1])
        self._last, self._source = now, source
        return added


def _cell(text: str) -> str:
    """``text`` as a markdown table cell: its ``|`` escaped (a node id's parameters may hold one)."""
    return text.replace("|", "\\|")


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.1f}"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def _cost_rows(run: Run, key: Callable[[str], str]) -> list[tuple[str, int, float, dict[str, float]]]:
    """(group, tests, collection seconds, {when: seconds}) per group of ``key``, costliest first."""
    collect: dict[str, float] = defaultdict(float)
    phases: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(_WHENS, 0.0))
    tests: dict[str, set[str]] = defaultdict(set)
    for module, seconds in run.collections:
        collect[key(module)] += seconds
    for nodeid, when, seconds in run.phases:
        phases[key(nodeid)][when] += seconds
        tests[key(nodeid)].add(nodeid)
    groups = set(collect) | set(phases)
    rows = [(g, len(tests[g]), collect[g], phases[g]) for g in groups]
    return sorted(rows, key=lambda r: (-(r[2] + sum(r[3].values())), r[0]))


def _cost_table(title: str, rows: list[tuple[str, int, float, dict[str, float]]], whole: float) -> list[str]:
    lines = [
        f"| {title} | tests | collection | setup | call | teardown | total | of the tests' time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for group, count, collect, when in rows:
        total = collect + sum(when.values())
        cells = [group, str(count), _s(collect), *(_s(when[w]) for w in _WHENS), _s(total), _pct(total, whole)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render(run: Run, modules: int = 10) -> str:
    """The account as markdown: a summary line, the test families, the ``modules`` costliest
    modules, the profile's families and the processes beside the run (longest first)."""
    whole = sum(s for _, s in run.collections) + sum(s for _, _, s in run.phases)
    profile_total = sum(s for _, s in run.profile)
    beside_wall = sum(p[2] or 0.0 for p in run.processes)
    beside_cpu = sum(p[3] or 0.0 for p in run.processes)
    tests = len({nodeid for nodeid, _, _ in run.phases})
    lines = [
        f"{tests} tests; the session {_s(run.wall)} s wall; CPU {_s(run.cpu[0])} s in pytest's process "
        f"and {_s(run.cpu[1])} s in the processes it started; load average {run.load[0]:.2f} at the "
        f"start, {run.load[1]:.2f} at the end; {run.versions}.",
        "",
        f"Collection and tests, in pytest's process ({_s(whole)} s; seconds of wall time):",
        "",
        *_cost_table("test family (folder)", _cost_rows(run, family_of), whole),
        "",
        *_cost_table(f"the {modules} costliest modules", _cost_rows(run, module_of)[:modules], whole),
        "",
    ]
    collections: dict[str, list[float]] = defaultdict(list)
    for family, seconds in run.profile:
        collections[family].append(seconds)
    times = max((len(v) for v in collections.values()), default=0)
    if not times:  # (a selection none of whose tests reads the profile: no empty table)
        lines.append("The profile collected in pytest's process: not at all (no test of this run collected it).")
    else:
        lines += [
            f"The profile collected in pytest's process: {times} time(s), {_s(profile_total)} s "
            f"({_pct(profile_total, whole)} of the tests' time, counted in their rows above):",
            "",
            "| profile family | collections | seconds | each |",
            "| --- | ---: | ---: | --- |",
        ]
        for family, each in sorted(collections.items(), key=lambda kv: (-sum(kv[1]), kv[0])):
            lines.append(f"| {family} | {len(each)} | {_s(sum(each))} | {', '.join(_s(s) for s in each)} |")
    lines += ["", *_compile_lines(run.compiles)]
    lines += [
        "",
        f"Processes beside the run: {len(run.processes)}, {_s(beside_wall)} s wall and {_s(beside_cpu)} s CPU "
        "together (CPU: user + system, the processes they waited for included):",
        "",
        "| process | started at | wall | CPU | exit |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, started, wall, cpu, code in sorted(run.processes, key=lambda p: (-(p[2] or 0.0), p[0])):
        cells = [_cell(name), _s(started), _s(wall), _s(cpu), "?" if code is None else str(code)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _compile_lines(compiles: list[tuple[str, int, int]] | None, tests: int = 10) -> list[str]:
    """What torch.compile cost in the pytest process, counted through inductor's FX graph cache
    (a compile with that cache switched off is not counted). A warm rerun of the same selection
    loads its graphs from the cache, so a test that compiles on one had its cache key move, or
    tried a compile that failed (never cached)."""
    if compiles is None:
        return [
            "torch.compile in pytest's process: not counted (under pytest-xdist the workers compile, and their "
            "counts do not reach this process)."
        ]
    compiled = sum(c for _, c, _ in compiles)
    loaded = sum(h for _, _, h in compiles)
    head = (
        f"torch.compile in pytest's process, through inductor's FX graph cache: {compiled} graph(s) compiled "
        f"or tried, {loaded} loaded from the cache (a warm rerun of the same tests compiles again only what "
        "inductor did not cache: a graph it cannot cache, a compile that failed)"
    )
    rows = sorted(((n, c, h) for n, c, h in compiles if c), key=lambda r: (-r[1], r[0]))
    if not rows:
        return [head + "."]
    lines = [f"{head}; the tests that compiled most:", "", "| test | compiled | loaded |", "| --- | ---: | ---: |"]
    return lines + [f"| {_cell(n)} | {c} | {h} |" for n, c, h in rows[:tests]]
