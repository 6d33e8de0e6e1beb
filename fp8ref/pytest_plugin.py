"""fp8ref as a pytest plugin, loaded through the package's ``pytest11`` entry point: a team's own
test suite gets it by installing fp8ref, without the fp8ref checkout.

- ``pytest --fp8-workload=pkg.module:function`` (repeatable): one test item per workload, which
  runs the function with no arguments under the tracer (``fp8ref.harness.trace``) and fails when
  an FP8 op it runs is not what the definition gives, naming the op and the line of the team's
  code that called it, or when none of its FP8 ops could be checked. It always runs: ``-m`` and
  ``-k`` do not deselect a workload asked for by name. The module is imported with the folder
  pytest runs from first on ``sys.path``, as ``python -m fp8ref trace`` imports it.
- ``pytest --fp8-claims=pkg.module:function`` (repeatable): one test item per target, whose
  function returns the results of the team's claims (``fp8ref.harness.claims``: a quantize kernel
  or a scaling update held to what it claims); it fails on each case that differs from the
  definition and the team did not name as known, printing the report. With ``--fp8-golden`` in
  fp8ref's suite the same results join the team's golden, one key per case.
- ``--fp8-workload-timeout=SECONDS`` (default 600; 0: none): a workload still running after it is
  stopped, its item failing with one line naming it (``workloads.targets.time_limit``: a
  ``SIGALRM`` timer, so POSIX and the main thread only, and a call stuck inside one C or CUDA call
  is stopped only when it returns).
- A target that is not there (its module does not import, no such function, a function that takes
  arguments) is a usage error before pytest collects (exit 4, one ``ERROR:`` line naming it).
- The ``fp8_trace`` fixture: ``fp8_trace(fn, *args, **kwargs)`` traces a call inside a team's own
  test and fails the test on a violation, or when nothing in it could be checked; it returns the
  ``Trace`` (its records, summary, digest).
- ``--fp8-golden=PATH``, ``--fp8-update-golden``, ``--fp8-require-golden``, ``--fp8-report=PATH``
  (and ``--fp8-report-format``, ``--fp8-golden-install``, ``--fp8-golden-device``): a team's own
  golden of its targets' keys, and the run's upgrade report (``fp8ref.pytest_golden``); fp8ref's
  checkout holds its own golden tests to the same options.

This module and ``fp8ref.pytest_golden`` are the modules of fp8ref that import pytest; nothing
else in fp8ref imports them. Loading them costs nothing: torch is imported only when a workload
runs, the fixture is used or a golden is asked for.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fp8ref import pytest_golden

__all__ = ["WorkloadItem", "ClaimsItem", "FP8Violation", "FP8NothingChecked", "FP8ClaimFailed"]


class FP8Violation(AssertionError):
    """A traced call ran FP8 ops the definition rejects."""


class FP8NothingChecked(AssertionError):
    """A traced call ran no FP8 op fp8ref could check: a pass would claim what was not checked."""


class FP8ClaimFailed(AssertionError):
    """A team's FP8 function differs from what it claims on a case it did not name as known."""


def _nothing_checked_text(what: str, trace: Any) -> str:
    if not trace.records:
        return (
            f"{what}: no op read or wrote a float8 dtype, so nothing was checked (not an FP8 program, FP8 "
            "turned off by its configuration, or its FP8 ops inside a fused kernel, which the tracer cannot see)"
        )
    return "\n".join(
        [f"{what}: none of its {len(trace.records)} FP8 op call(s) could be checked:"]
        + [f"  {line}" for line in trace.summary()]
    )


def _judge(what: str, trace: Any) -> None:
    """Fails on a violation, and when nothing was checked."""
    if trace.violations:
        raise FP8Violation(_violations_text(what, trace))
    if all(record.status == "unchecked" for record in trace.records):
        raise FP8NothingChecked(_nothing_checked_text(what, trace))


def _violations_text(what: str, trace: Any) -> str:
    lines = [f"{what}: {len(trace.violations)} FP8 op call(s) the definition rejects"]
    lines += [f"  {record.report()}" for record in trace.violations]
    lines += ["FP8 ops traced:"] + [f"  {line}" for line in trace.summary()]
    return "\n".join(lines)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fp8ref", "fp8ref: FP8 numerics held to their definition")
    group.addoption(
        "--fp8-workload",
        action="append",
        default=[],
        metavar="pkg.module:function",
        help="trace this function (no arguments) and check every FP8 op it runs against the definition; repeatable",
    )
    group.addoption(
        "--fp8-claims",
        action="append",
        default=[],
        metavar="pkg.module:function",
        help="run this function (no arguments), which returns the results of the team's claims "
        "(fp8ref.harness.claims), and fail on each case that differs; with --fp8-golden they join that golden; "
        "repeatable",
    )
    group.addoption(
        "--fp8-workload-timeout",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="stop a --fp8-workload still running after SECONDS (default 600; 0: no limit), failing its item; "
        "POSIX, main thread: a call stuck inside one C or CUDA call stops only when it returns",
    )
    pytest_golden.add_options(group)


def _seconds(text: str) -> float:
    """``--fp8-workload-timeout``'s value: a number of seconds, 0 or more."""
    import argparse
    import math

    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more (0: no limit), got {text!r}")
    return seconds


class _TargetItem(pytest.Item):
    """One ``pkg.module:function`` target asked for by an option (``OPTION``): the failures it
    raises itself (``OWN``) print as their words, a target that is not there as one line."""

    OPTION = ""
    MARK = ""
    OWN: tuple[type[BaseException], ...] = ()

    def __init__(self, *, target: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.add_marker(getattr(pytest.mark, self.MARK))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        from fp8ref.harness.trace.target import TargetError

        if isinstance(excinfo.value, self.own()):
            return str(excinfo.value)
        if isinstance(excinfo.value, TargetError):  # the module or the function is not there
            return f"{self.OPTION}: {excinfo.value}"
        # (the target raised: that first, the line pytest's summary shows, then where)
        headline = f"{self.OPTION}: {self.target} raised {type(excinfo.value).__name__}: {excinfo.value}"
        return f"{headline}\n{excinfo.getrepr(style='short', showlocals=False)}"

    def own(self) -> tuple[type[BaseException], ...]:
        """The failures it raises itself: ``OWN``."""
        return self.OWN

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.target, None, f"{self.MARK.replace('_', ' ')} {self.target}"


class WorkloadItem(_TargetItem):
    """One ``--fp8-workload``: the function traced (once per run: a team's golden reads the same
    trace), its violations a failure, a run past ``--fp8-workload-timeout`` one line."""

    OPTION, MARK, OWN = "--fp8-workload", "fp8_workload", (FP8Violation, FP8NothingChecked)

    def own(self) -> tuple[type[BaseException], ...]:
        from fp8ref.harness.workloads.targets import WorkloadTimeout  # (a workload's only: loads torch)

        return (*self.OWN, WorkloadTimeout)

    def runtest(self) -> None:
        from fp8ref.harness.workloads.targets import traced_target

        timeout = self.config.getoption("--fp8-workload-timeout") or None
        result = traced_target(self.target, self.config.invocation_params.dir, timeout)  # TargetError: one line
        _judge(self.target, result)
        self.user_properties.append(("fp8_ops", "; ".join(result.summary())))


class ClaimsItem(_TargetItem):
    """One ``--fp8-claims``: the team's claims' results, a case that differs a failure."""

    OPTION, MARK, OWN = "--fp8-claims", "fp8_claims", (FP8ClaimFailed,)

    def runtest(self) -> None:
        from fp8ref.harness.claims import failures, report
        from fp8ref.harness.claims.targets import claim_results

        results = claim_results(self.target, self.config.invocation_params.dir)  # TargetError: one line
        if failures(results):
            raise FP8ClaimFailed(f"{self.target}: {len(failures(results))} case(s) differ\n{report(results)}")
        for r in results:
            if r.not_run is not None:  # (said where a run's reader looks: a pass checked the rest)
                words = f"{self.target}: {r.claim}: {r.case}: not run: {r.not_run}"
                warnings.warn(pytest.PytestWarning(words), stacklevel=1)
        self.user_properties.append(("fp8_claims", report(results).splitlines()[0]))


_TARGET_OPTIONS = {"--fp8-workload": (WorkloadItem, "fp8-workload"), "--fp8-claims": (ClaimsItem, "fp8-claims")}


@pytest.hookimpl(trylast=True)  # (after a suite's own configure: fp8ref's checkout says it compares its golden)
def pytest_configure(config: pytest.Config) -> None:
    """Every usage error before pytest collects, the cheapest first: a target's form, the golden
    options and the paths the run writes, each target's function (its module imported), the
    golden's device kind."""
    config.addinivalue_line("markers", "fp8_workload: a --fp8-workload traced by fp8ref")
    config.addinivalue_line("markers", "fp8_claims: a --fp8-claims target's results, checked by fp8ref")
    config.addinivalue_line("markers", "fp8_golden: a team's --fp8-golden, compared by fp8ref")
    # (a run's targets are its own: another pytest.main in this process ran them before)
    for kept in ("fp8ref.harness.claims.targets", "fp8ref.harness.workloads.targets"):
        if kept in sys.modules:
            sys.modules[kept].forget()
    for option in _TARGET_OPTIONS:
        for target in config.getoption(option) or ():
            module, colon, name = target.partition(":")
            if not (module and colon and name):  # (a target that names no module or no function stops the run)
                raise pytest.UsageError(
                    f"{option}={target}: expected pkg.module:function (a module, ':', a function in it)"
                )
    pytest_golden.check_before_collecting(config)
    _check_targets(config)
    pytest_golden.check_device(config)


def _check_targets(config: pytest.Config) -> None:
    """Each target's function, found as its item will find it; a usage error naming the first
    that is not there, or two workloads that would be one key of a golden."""
    from fp8ref.harness.trace.target import TargetError, load_target
    from fp8ref.harness.workloads.targets import key_of_target

    keys: dict[str, str] = {}
    for option in _TARGET_OPTIONS:
        for target in dict.fromkeys(config.getoption(option) or ()):
            try:
                load_target(target, config.invocation_params.dir)
            except TargetError as exc:
                raise pytest.UsageError(f"{option}={target}: {exc}") from None
            if option == "--fp8-workload":
                key = key_of_target(target)
                if key in keys:
                    raise pytest.UsageError(
                        f"--fp8-workload={target}: {keys[key]!r} and {target!r} would be one key of a golden, {key}"
                    )
                keys[key] = target


@pytest.hookimpl(trylast=True)  # (after -m and -k deselect: a target asked for by name always runs)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for option, (kind, label) in _TARGET_OPTIONS.items():
        for target in dict.fromkeys(config.getoption(option) or ()):  # (a target named twice runs once)
            items.append(kind.from_parent(session, name=f"{label}[{target}]", target=target))
    items.extend(pytest_golden.golden_items(session))  # (last: it reads the targets' results)


def pytest_sessionstart(session: pytest.Session) -> None:
    pytest_golden.session_started(session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    pytest_golden.hand_to_controller(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: a worker's golden comparisons, for the run's report."""
    pytest_golden.take_from_worker(node)


@pytest.hookimpl(trylast=True)  # (after a suite's own sections: fp8ref's checkout hands them to the report)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    pytest_golden.write_report(config, terminalreporter, exitstatus)


@pytest.fixture
def fp8_trace() -> Iterator[Callable[..., Any]]:
    """``fp8_trace(fn, *args, **kwargs)``: ``fn`` traced (``fp8ref.harness.trace.trace``); the test
    fails naming each FP8 op the definition rejects and the line that called it. Returns the
    ``Trace``."""
    from fp8ref.harness.trace import trace

    def traced(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result = trace(fn, *args, **kwargs)
        _judge(getattr(fn, "__qualname__", repr(fn)), result)
        return result

    yield traced
