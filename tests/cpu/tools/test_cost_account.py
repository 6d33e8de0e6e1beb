"""The default tier's cost account (``--fp8-durations``: tests/plugins/durations.py,
tests/common/cost_account.py, tests/common/process_account.py) and the script that writes it into
docs/timings.md (scripts/timings.py): a run with known durations gives the known table, every
process the tests start is counted with its CPU time, and the docs are only rewritten between
their markers."""

import contextlib
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import torch

from tests.common.cost_account import CompileCounter, Run, family_of, module_of, render
from tests.common.paths import ROOT
from tests.common.process_account import ProcessAccount, labelled

pytest_plugins = ["pytester"]

_BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass"


def test_a_run_with_known_durations_gives_the_known_table():
    run = Run(
        phases=[
            ("tests/cpu/tools/test_cli.py::test_one", "setup", 1.0),
            ("tests/cpu/tools/test_cli.py::test_one", "call", 2.0),
            ("tests/cpu/tools/test_cli.py::test_one", "teardown", 0.5),
            ("tests/cpu/tools/test_cli.py::test_two[x]", "call", 0.5),
            ("tests/meta/test_catch_rate.py::test_three", "call", 4.0),
        ],
        collections=[("tests/cpu/tools/test_cli.py", 0.5), ("tests/meta/test_catch_rate.py", 1.5)],
        profile=[("casts", 1.0), ("native", 2.0), ("casts", 0.25)],
        processes=[
            ("tests.x:help", 3.0, 0.25, 0.2, 0),
            ("tests.y:fsdp", 1.0, 12.0, 20.0, 1),
            ("file -b", 0.0, None, None, None),
        ],
        wall=20.0,
        cpu=(30.0, 20.5),
        load=(0.5, 1.25),
        versions="torch 9.9.9, Python 3.11.7, 2 CPUs",
        compiles=[
            ("tests/cpu/tools/test_cli.py::test_one", 0, 3),
            ("tests/meta/test_catch_rate.py::test_three", 2, 1),
            ("tests/cpu/tools/test_cli.py::test_two[a|b]", 5, 0),
        ],
    )
    assert render(run, modules=1) == (
        "3 tests; the session 20.0 s wall; CPU 30.0 s in pytest's process and 20.5 s in the processes it "
        "started; load average 0.50 at the start, 1.25 at the end; torch 9.9.9, Python 3.11.7, 2 CPUs.\n"
        "\n"
        "Collection and tests, in pytest's process (10.0 s; seconds of wall time):\n"
        "\n"
        "| test family (folder) | tests | collection | setup | call | teardown | total | of the tests' time |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        "| tests/meta | 1 | 1.5 | 0.0 | 4.0 | 0.0 | 5.5 | 55% |\n"
        "| tests/cpu/tools | 2 | 0.5 | 1.0 | 2.5 | 0.5 | 4.5 | 45% |\n"
        "\n"
        "| the 1 costliest modules | tests | collection | setup | call | teardown | total | of the tests' time |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        "| tests/meta/test_catch_rate.py | 1 | 1.5 | 0.0 | 4.0 | 0.0 | 5.5 | 55% |\n"
        "\n"
        "The profile collected in pytest's process: 2 time(s), 3.2 s (32% of the tests' time, counted in "
        "their rows above):\n"
        "\n"
        "| profile family | collections | seconds | each |\n"
        "| --- | ---: | ---: | --- |\n"
        "| native | 1 | 2.0 | 2.0 |\n"
        "| casts | 2 | 1.2 | 1.0, 0.2 |\n"
        "\n"
        "torch.compile in pytest's process, through inductor's FX graph cache: 7 graph(s) compiled or tried, 4 "
        "loaded from the cache (a warm rerun of the same tests compiles again only what inductor did not cache: "
        "a graph it cannot cache, a compile that failed); the tests that compiled "
        "most:\n"
        "\n"
        "| test | compiled | loaded |\n"
        "| --- | ---: | ---: |\n"
        "| tests/cpu/tools/test_cli.py::test_two[a\\|b] | 5 | 0 |\n"
        "| tests/meta/test_catch_rate.py::test_three | 2 | 1 |\n"
        "\n"
        "Processes beside the run: 3, 12.2 s wall and 20.2 s CPU together (CPU: user + system, the "
        "processes they waited for included):\n"
        "\n"
        "| process | started at | wall | CPU | exit |\n"
        "| --- | ---: | ---: | ---: | ---: |\n"
        "| tests.y:fsdp | 1.0 | 12.0 | 20.0 | 1 |\n"
        "| tests.x:help | 3.0 | 0.2 | 0.2 | 0 |\n"
        "| file -b | 0.0 | ? | ? | ? |\n"
    )


def test_a_run_that_compiled_nothing_says_so_in_one_line():
    text = render(Run(compiles=[("tests/cpu/tools/test_cli.py::test_a", 0, 4)]))
    assert (
        "torch.compile in pytest's process, through inductor's FX graph cache: 0 graph(s) compiled or tried, 4 "
        "loaded from the cache (a warm rerun of the same tests compiles again only what inductor did not cache: "
        "a graph it cannot cache, a compile that failed).\n\nProcesses" in text
    ), text


def test_under_pytest_xdist_compiles_are_said_to_be_uncounted():
    assert "torch.compile in pytest's process: not counted (under pytest-xdist the workers compile" in render(
        Run(compiles=None)
    )


def test_each_phase_is_given_what_inductor_counted_since_the_last_and_a_cleared_count_starts_anew():
    """(compiled, loaded) running counts and the object holding them, read after each test phase;
    the fresh_dynamo fixture clears them around a compiled test (a new object, or none)."""
    counter = CompileCounter()
    first, second = object(), object()
    assert counter.step((0, 0), None) == (0, 0)
    assert counter.step((3, 1), first) == (3, 1)
    assert counter.step((5, 1), first) == (2, 0)
    assert counter.step((0, 0), None) == (0, 0)  # cleared (a fixture's setup), nothing since
    assert counter.step((2, 3), second) == (2, 3)
    assert counter.step((1, 5), first) == (1, 5)  # cleared, then one compiled and five loaded
    assert counter.step((1, 5), first) == (0, 0)
    assert counter.step((0, 7), first) == (0, 7)  # a count that went down under the same object: cleared
    assert counter.step((9, 9), second) == (9, 9)  # cleared, then more than before: a new object says so


def test_the_account_reads_the_counters_inductor_writes():
    """The names the account reads (tests/plugins/durations.py) are the ones this torch's
    inductor counts its FX graph cache's outcomes under: a rename would leave the account at 0."""
    import inspect

    import torch._inductor.codecache as codecache

    from tests.plugins import durations

    source = inspect.getsource(codecache)
    for name in durations.COMPILED + durations.LOADED:
        assert f'counters["inductor"]["{name}"]' in source, f"torch {torch.__version__}'s inductor counts no {name}"


def test_a_test_belongs_to_its_folder():
    assert module_of("tests/cpu/install/test_trace.py::test_y[a::b]") == "tests/cpu/install/test_trace.py"
    assert family_of("tests/cpu/install/test_trace.py::test_y") == "tests/cpu/install"
    assert family_of("test_top.py::test_y") == "."


def test_a_run_that_collects_no_profile_says_so_without_an_empty_table():
    run = Run(
        phases=[("tests/cpu/reference/test_formats.py::test_one", "call", 1.0)],
        collections=[("tests/cpu/reference/test_formats.py", 0.1)],
        profile=[],
        processes=[],
        wall=2.0,
        cpu=(1.5, 0.0),
        load=(0.5, 0.5),
        versions="torch 9.9.9, Python 3.11.7, 2 CPUs",
        compiles=[],
    )
    text = render(run, modules=1)
    assert "The profile collected in pytest's process: not at all (no test of this run collected it).\n" in text
    assert "| profile family |" not in text


def test_every_process_is_counted_with_its_cpu_time_while_the_account_is_open():
    before = subprocess.Popen
    account = ProcessAccount()
    account.open()
    try:
        account.test = "tests/cpu/tools/test_cli.py::test_burn"
        done = subprocess.run([sys.executable, "-c", _BURN.format(s=0.3)], timeout=60)
        with labelled("the queue's job"):
            proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
            proc.wait(timeout=60)
        with pytest.raises(FileNotFoundError):  # (never started: not counted)
            subprocess.run(["/nonexistent/fp8ref-no-such-program"])
    finally:
        account.close()
    assert subprocess.Popen is before, "closing the account must give subprocess its own Popen back"
    # (the run's own processes beside the tests, started by the queue's thread while the account
    # was open, are counted too: this test's two are told by their commands)
    burns = [p for p in account.processes if "process_time" in p.name]
    nameds = [p for p in account.processes if p.name == "the queue's job"]
    assert len(burns) == 1 and len(nameds) == 1, account.processes
    assert not [p for p in account.processes if "fp8ref-no-such-program" in p.name], account.processes
    (burn,), (named,) = burns, nameds
    assert done.returncode == 0 and burn.code == 0 and named.code == 3
    assert burn.name.startswith("tests/cpu/tools/test_cli.py::test_burn: python"), burn.name
    assert named.name == "the queue's job"
    assert burn.cpu is not None and 0.25 <= burn.cpu < 5, burn
    assert burn.wall is not None and burn.wall >= burn.cpu * 0.5, burn
    assert named.cpu is not None and named.cpu < burn.cpu, (named, burn)


def test_a_process_started_inside_a_nested_account_is_the_inner_ones_alone():
    """A fake suite run inside the run (a test of the account) opens its own account: its
    processes are not the outer run's, and the outer table must not list them half-measured."""
    outer, inner = ProcessAccount(), ProcessAccount()
    outer.open()
    try:
        inner.open()
        try:
            subprocess.run([sys.executable, "-c", "pass"], check=True)
        finally:
            inner.close()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    finally:
        outer.close()
    assert len(inner.processes) == 1 and inner.processes[0].cpu is not None, inner.processes
    assert len(outer.processes) == 1 and outer.processes[0].cpu is not None, outer.processes


@contextlib.contextmanager
def _counters_kept() -> Iterator[None]:
    """torch's counters as they were, in the same objects: the run's own account reads them after
    each phase and takes a new object for a clear."""
    from torch._dynamo.utils import counters

    kept = {name: (counter, dict(counter)) for name, counter in counters.items()}
    try:
        yield
    finally:
        counters.clear()
        for name, (counter, values) in kept.items():
            counter.clear()
            counter.update(values)
            counters[name] = counter


def test_the_plugin_accounts_a_fake_suite_of_known_durations(pytester):
    pytester.makeconftest(
        """
import pytest
pytest_plugins = ["tests.plugins.durations"]

def pytest_addoption(parser):
    parser.addoption("--fp8-durations", action="store_true", default=False)
    parser.addoption("--fp8-durations-md", default=None)
"""
    )
    pytester.makepyfile(
        test_slow="""
import subprocess, sys, time
import pytest

@pytest.fixture
def slow_setup():
    time.sleep(0.3)

def test_sleeps(slow_setup):
    time.sleep(0.6)

def test_starts_a_process():
    subprocess.run([sys.executable, "-c", BURN], check=True)
""".replace("BURN", repr(_BURN.format(s=0.3))),
        test_compiled="""
from torch._dynamo.utils import counters

def test_compiles():  # (what inductor adds when it compiles three graphs, loads three, one twice)
    counters["inductor"]["fxgraph_cache_miss"] += 2
    counters["inductor"]["fxgraph_cache_bypass"] += 1
    counters["inductor"]["fxgraph_cache_hit"] += 3

def test_clears_then_loads():  # (fresh_dynamo's clear, then one graph loaded)
    counters.clear()
    counters["inductor"]["fxgraph_cache_hit"] += 1
""",
    )
    out = pytester.path / "cost.md"
    started = time.monotonic()
    with _counters_kept():  # (the fake suite's counts are not this run's: its own account must not see them)
        result = pytester.runpytest_inprocess("-p", "no:randomly", "--fp8-durations", f"--fp8-durations-md={out}")
    assert result.ret == 0, result.stdout.str()
    assert "The default tier's cost (--fp8-durations)" in result.stdout.str()
    text = out.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| test_slow.py |"))
    _, _, tests, _, setup, call, _, _, share, _ = (c.strip() for c in row.split("|"))
    assert tests == "2" and share.endswith("%"), row
    assert 0.3 <= float(setup) < 0.3 + 1.5 and 0.9 <= float(call) < 0.9 + 3, row  # the sleeps, the process's wait
    process = next(line for line in text.splitlines() if line.startswith("| test_slow.py::test_starts_a_process:"))
    cpu = float(process.split("|")[4])
    assert 0.2 <= cpu < 5, process
    assert float(text.split("the session ")[1].split(" s wall")[0]) <= time.monotonic() - started + 0.1
    # inductor's counts, as its counters hold them: misses and bypasses compiled, hits loaded
    assert "FX graph cache: 3 graph(s) compiled or tried, 4 loaded from the cache" in text, text
    assert "| test_compiled.py::test_compiles | 3 | 3 |" in text, text


def test_the_script_rewrites_only_what_lies_between_the_markers():
    spec = importlib.util.spec_from_file_location("_fp8ref_script_timings", ROOT / "scripts" / "timings.py")
    assert spec is not None and spec.loader is not None
    timings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(timings)
    doc = f"# Measured times\n\nbefore\n{timings.START}\nold table\n{timings.END}\nafter\n"
    new = timings.splice(doc, "| a | b |\n", "Measured today.")
    assert new == f"# Measured times\n\nbefore\n{timings.START}\nMeasured today.\n\n| a | b |\n{timings.END}\nafter\n"
    with pytest.raises(ValueError, match="docs/timings.md: no .*cost-account:start"):
        timings.splice("# no markers\n", "| a |\n", "x")
    assert timings.START in (ROOT / "docs" / "timings.md").read_text(), "docs/timings.md lost its markers"
