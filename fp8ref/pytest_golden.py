"""The golden half of fp8ref's pytest plugin (``fp8ref.pytest_plugin`` registers its options and
calls it from its hooks): a team's own golden from its own suite, the run's report, and the checks
of both before any work.

- ``--fp8-golden=PATH`` (a ``.json`` file, or a folder of ``<device kind>.json`` files): in a
  team's suite (one whose own tests do not compare a golden: any but fp8ref's checkout, which says
  so through ``SUITE_GOLDEN``) one more item, ``fp8-golden[PATH]``, holds the team's profile to
  the golden: this install's ``versions`` and the keys of the team's ``--fp8-workload`` targets
  (``workload.<target>``, with their traces) and ``--fp8-claims`` targets (``claim.<target>.*``);
  with ``--fp8-golden-install``, fp8ref's whole profile of the install too (every family: tens of
  seconds on a CPU, minutes on a GPU). The comparison and the accepted differences are
  ``fp8ref.harness.profiles.golden``'s, as for fp8ref's own golden test. A difference fails the
  item, one line per key (a workload's ending with the call where it first diverged and its line
  in the team's code), and says how to accept it (``python -m fp8ref accept``) or re-pin it.
- ``--fp8-update-golden`` pins it (whole or not at all: a target that gave no result leaves it
  unwritten); ``--fp8-require-golden`` fails instead of skipping when it is missing;
  ``--fp8-report=PATH`` writes the upgrade report (``fp8ref.harness.profiles.run_report``).
- Before collecting (``pytest.UsageError``: exit 4, one ``ERROR:`` line): an output path whose
  folder does not exist or cannot be written (``check_output_path``: no folder is created but a
  folder of goldens PATH itself), a golden of another device kind than the run's, options that
  need ``--fp8-golden`` without it.

The device of a team's golden is ``--fp8-golden-device``, else ``cuda`` where torch sees a CUDA
device and ``cpu`` elsewhere: it names the golden file in a folder of goldens, labels the
profile's versions, and is where ``--fp8-golden-install`` collects.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "SUITE_GOLDEN",
    "REPORT_SECTIONS",
    "GoldenItem",
    "FP8GoldenDiffers",
    "add_options",
    "golden_option",
    "check_output_path",
    "check_before_collecting",
    "check_device",
    "golden_items",
    "record_golden",
    "accept_hint",
    "with_team_targets",
]

# set by a suite whose own tests compare the golden (fp8ref's checkout: tests/plugins/fixtures.py),
# to the golden they compare without --fp8-golden: no golden item of the plugin's is added there
SUITE_GOLDEN = pytest.StashKey[Path]()
# the end-of-run sections a suite adds to the report (fp8ref's checkout: tests/plugins/summaries.py)
REPORT_SECTIONS = pytest.StashKey[list[tuple[str, list[str]]]]()
_ENTRIES = pytest.StashKey[list[dict]]()  # the run's golden comparisons (run_report.golden_entry)
_SESSION = pytest.StashKey[pytest.Session]()
_DEVICE = pytest.StashKey[str]()
_WORKER_KEY = "fp8ref_golden"  # an xdist worker's comparisons, for the controller's report


class FP8GoldenDiffers(AssertionError):
    """The team's profile differs from its golden, or the golden cannot hold it."""


def add_options(group: Any) -> None:
    group.addoption(
        "--fp8-golden",
        default=None,
        metavar="PATH",
        help="hold this install to the golden profile at PATH, one you own (a .json file, or a folder of "
        "<device kind>.json files): in your suite, your --fp8-workload and --fp8-claims targets' keys; in fp8ref's "
        "checkout, its whole profile. With --fp8-update-golden, pin it there (whole or not at all). "
        "NAME-installs.json beside NAME.json names the differences accepted, with why",
    )
    group.addoption(
        "--fp8-update-golden",
        action="store_true",
        default=False,
        help="pin the golden (--fp8-golden's PATH; in fp8ref's checkout without it, tests/golden/<device kind>.json) "
        "from this install, on purpose; say why in the commit",
    )
    group.addoption(
        "--fp8-require-golden",
        action="store_true",
        default=False,
        help="a missing golden fails the golden test instead of skipping: for CI that must not go green "
        "without the comparison",
    )
    group.addoption(
        "--fp8-report",
        default=None,
        metavar="PATH",
        help="write the upgrade report to PATH at the end of the run: the golden's differences grouped by "
        "family with their meaning, consequence and severity, then the end-of-run sections "
        "(Markdown; JSON when PATH ends in .json). Its folder must exist",
    )
    group.addoption(
        "--fp8-report-format",
        choices=["full", "summary"],
        default="full",
        help="--fp8-report's Markdown: full (every differing key, default) or summary (counts and the most serious "
        "keys per family, the golden comparison under 60,000 characters: a pull-request comment)",
    )
    group.addoption(
        "--fp8-golden-install",
        action="store_true",
        default=False,
        help="your suite's --fp8-golden holds fp8ref's whole profile of this install too (every family it "
        "measures: tens of seconds on a CPU, minutes on a GPU), not only your targets' keys",
    )
    group.addoption(
        "--fp8-golden-device",
        choices=["cpu", "cuda"],
        default=None,
        help="the device kind your suite's --fp8-golden is of (default: cuda where torch sees a CUDA device, else cpu)",
    )


# --- the checks before collecting --------------------------------------------------------------


def golden_option(config: pytest.Config) -> Path | None:
    """``--fp8-golden``'s path, absolute, or None when the option is not given; an empty value (an
    unset ``$VAR`` in a CI line) is a usage error, never a silent fall-back to another golden."""
    value = config.getoption("--fp8-golden")
    if value is None:
        return None
    if not str(value).strip():
        raise pytest.UsageError(
            "--fp8-golden: expected the path of a golden profile (a .json file or a folder of <device kind>.json "
            "files), got an empty value (an unset variable?)"
        )
    return Path(value).expanduser().resolve()


def check_output_path(value: str | os.PathLike[str], option: str, *, folder: bool = False) -> Path:
    """``value`` as a path this run writes (with ``folder``: a folder of goldens it writes files
    into), or a ``pytest.UsageError`` naming ``option``, the path and why not: the one check of an
    output path, the command line's too (``atomic.check_writable``: its folder must exist, a missing
    one is never created, and take a new file, which is tried; the path itself a regular file or not
    there yet, not read-only). It leaves nothing behind."""
    from fp8ref.harness.profiles.atomic import check_writable

    try:
        return check_writable(value, option, folder=folder)
    except OSError as exc:  # (atomic.UnwritablePath: its words name the option and the path)
        raise pytest.UsageError(str(exc)) from exc


def _team_suite(config: pytest.Config) -> bool:
    """A suite whose own tests do not compare a golden (any but fp8ref's checkout)."""
    return SUITE_GOLDEN not in config.stash


def _target_options(config: pytest.Config) -> dict[str, Any]:
    """The run's targets and how they run: ``with_targets``' and ``of_targets``' keyword arguments."""
    return {
        "workloads": _targets(config, "--fp8-workload"),
        "claims": _targets(config, "--fp8-claims"),
        "folder": config.invocation_params.dir,
        "timeout": _timeout(config),
    }


def _targets(config: pytest.Config, option: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(config.getoption(option) or ()))


def check_before_collecting(config: pytest.Config) -> None:
    """The usage errors of the golden options (``pytest.UsageError``): options that need
    ``--fp8-golden`` without it, a team's golden with nothing to hold, and the paths the run
    writes (``check_output_path``). The golden's device kind: ``check_device``."""
    owned = golden_option(config)
    team = _team_suite(config)
    for option, given in (
        ("--fp8-golden-install", config.getoption("--fp8-golden-install")),
        ("--fp8-golden-device", config.getoption("--fp8-golden-device") is not None),
    ):
        if given and not team:
            raise pytest.UsageError(f"{option}: for a team's own suite; fp8ref's golden tests hold its whole profile")
        if given and owned is None:
            raise pytest.UsageError(f"{option}: needs --fp8-golden=PATH (the golden your suite pins)")
    if team and owned is None:
        for option in ("--fp8-update-golden", "--fp8-require-golden"):
            if config.getoption(option):
                raise pytest.UsageError(f"{option}: needs --fp8-golden=PATH (the golden your suite pins)")
    asked = _targets(config, "--fp8-workload") or _targets(config, "--fp8-claims")
    if team and owned is not None and not asked and not config.getoption("--fp8-golden-install"):
        raise pytest.UsageError(
            "--fp8-golden: nothing for it to hold in your suite: name your --fp8-workload or --fp8-claims targets "
            "(their keys are its keys), or --fp8-golden-install for fp8ref's whole profile of this install"
        )
    report = config.getoption("--fp8-report")
    if report is not None:
        check_output_path(report, "--fp8-report")
    if config.getoption("--fp8-update-golden"):
        where = owned or config.stash[SUITE_GOLDEN]
        # a .json path is the golden file itself, anything else a folder of <device kind>.json files
        # (golden.golden_path's rule; that folder must be there: none is created)
        one_file = where.suffix == ".json" and not where.is_dir()
        check_output_path(where, "--fp8-golden" if owned else "--fp8-update-golden", folder=not one_file)


def check_device(config: pytest.Config) -> None:
    """A team's golden of another device kind than the run's is a usage error, read before any
    profile is collected (fp8ref's checkout checks its golden tests' own, when they are collected)."""
    owned = golden_option(config)
    if _team_suite(config) and owned is not None:
        from fp8ref.harness.profiles.golden import golden_of_another_device

        wrong = golden_of_another_device(owned, run_device(config))
        if wrong is not None:
            default = "" if config.getoption("--fp8-golden-device") else ", the default here"
            raise pytest.UsageError(
                f"--fp8-golden: {wrong} (this run: --fp8-golden-device={run_device(config)}{default})"
            )


def run_device(config: pytest.Config) -> str:
    """The device of a team's golden: ``--fp8-golden-device``, else ``cuda`` where torch sees a
    CUDA device, ``cpu`` elsewhere."""
    if _DEVICE not in config.stash:
        import torch

        asked = config.getoption("--fp8-golden-device")
        if asked == "cuda" and not torch.cuda.is_available():
            raise pytest.UsageError(
                f"--fp8-golden-device=cuda: torch {torch.__version__} sees no CUDA device here "
                f"(CUDA build {torch.version.cuda or 'none'})"
            )
        config.stash[_DEVICE] = asked or ("cuda" if torch.cuda.is_available() else "cpu")
    return config.stash[_DEVICE]


# --- the team's golden item ---------------------------------------------------------------------


def golden_items(session: pytest.Session) -> list[pytest.Item]:
    """The golden item a team's suite gets with ``--fp8-golden`` (none in fp8ref's checkout)."""
    config = session.config
    if not _team_suite(config) or golden_option(config) is None:
        return []
    return [GoldenItem.from_parent(session, name=f"fp8-golden[{config.getoption('--fp8-golden')}]")]


def _timeout(config: pytest.Config) -> float | None:
    return config.getoption("--fp8-workload-timeout") or None


def with_team_targets(config: pytest.Config, profile: dict) -> dict:
    """``profile`` with the keys of the run's ``--fp8-workload`` and ``--fp8-claims`` targets
    (``profile.with_targets``), for fp8ref's own golden tests with ``--fp8-golden``: a team's
    golden holds its targets there too."""
    from fp8ref.harness.profiles.profile import with_targets

    got, _ = with_targets(profile, **_target_options(config))
    return got


class _NotPinned(Exception):
    """A target gave no result: the golden is not written."""


class GoldenItem(pytest.Item):
    """``--fp8-golden`` in a team's suite: the team's profile (``profile.of_targets``) held to its
    golden, pinned with ``--fp8-update-golden``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.fp8_golden)

    def _pin_command(self) -> str:
        config = self.config
        argv = ["pytest"]
        argv += [f"--fp8-workload={t}" for t in _targets(config, "--fp8-workload")]
        argv += [f"--fp8-claims={t}" for t in _targets(config, "--fp8-claims")]
        argv.append(f"--fp8-golden={golden_option(config)}")
        if config.getoption("--fp8-golden-install"):
            argv.append("--fp8-golden-install")
        if config.getoption("--fp8-golden-device"):
            argv.append(f"--fp8-golden-device={config.getoption('--fp8-golden-device')}")
        return " ".join(shlex.quote(a) for a in [*argv, "--fp8-update-golden"])

    def runtest(self) -> None:
        from fp8ref.harness.profiles.golden import compare_with_golden, golden_path
        from fp8ref.harness.profiles.profile import of_targets

        config = self.config
        where, device = golden_option(config), run_device(config)
        assert where is not None  # (the item exists only with --fp8-golden)
        update = bool(config.getoption("--fp8-update-golden"))
        collected: dict[str, dict] = {}

        def collect(device: str) -> dict:
            now, failed = of_targets(
                device, **_target_options(config), install=bool(config.getoption("--fp8-golden-install"))
            )
            collected["now"] = now
            if update and failed:  # (a golden pinning what a broken run gave would hold it so)
                raise _NotPinned("\n".join(f"  {t}: {why}" for t, why in failed.items()))
            return now

        try:
            status, lines = compare_with_golden(
                where, device, update=update, how_to_pin=self._pin_command(), collect=collect
            )
        except _NotPinned as exc:
            lines = [f"not pinned: {golden_path(where, device)} is left as it was, since these targets gave no result:"]
            record_golden(config, where, device, "not pinned", [*lines, str(exc)])
            raise FP8GoldenDiffers("\n".join([*lines, str(exc)])) from None
        now = collected.get("now")
        record_golden(config, where, device, status, lines, now)
        if status == "missing" and config.getoption("--fp8-require-golden"):
            raise FP8GoldenDiffers("--fp8-require-golden: " + "\n".join(lines))
        if status in ("missing", "updated"):
            pytest.skip(" ".join(lines))
        if status == "differs" and now is not None:
            lines = [*lines, accept_hint(golden_path(where, device), _save_now(config, now, device))]
            raise FP8GoldenDiffers("FP8 behaviour differs from the pinned golden:\n" + "\n".join(lines))
        if status not in ("equal", "named"):  # unreadable, wrong device
            raise FP8GoldenDiffers("\n".join(lines))
        self.user_properties.append(("fp8_golden", f"{status}: {golden_path(where, device)}"))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from fp8ref.harness.workloads.targets import WorkloadTimeout

        if isinstance(excinfo.value, (FP8GoldenDiffers, WorkloadTimeout)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return str(self.config.getoption("--fp8-golden")), None, f"fp8 golden {self.config.getoption('--fp8-golden')}"


def _save_now(config: pytest.Config, now: dict, device: str) -> Path:
    """This run's profile, for ``python -m fp8ref accept``: in pytest's cache folder
    (``.pytest_cache/d/fp8ref-now``, kept until the next run writes its own there), else, with the
    cache off (``-p no:cacheprovider``), in pytest's temporary folder (pytest keeps the last three
    runs' there, and other runs of the same user rotate them out)."""
    import tempfile

    from fp8ref.harness.profiles.profile_file import save
    from fp8ref.harness.stack.install import device_kind

    cache = getattr(config, "cache", None)
    factory = getattr(config, "_tmp_path_factory", None)  # (pytest's tmp_path_factory, outside a fixture)
    if cache is not None:
        folder = Path(cache.mkdir("fp8ref-now"))
    elif factory is not None:
        folder = factory.mktemp("fp8ref-now")
    else:
        folder = Path(tempfile.mkdtemp(prefix="fp8ref-now-"))
    path = folder / f"{device_kind(device)}.json"
    save(now, path)
    return path


def accept_hint(golden: Path, now: Path) -> str:
    """How to accept this install's differences from ``golden`` on purpose, ``now`` being its
    profile: ``python -m fp8ref accept`` (``--key PATTERN`` for some of them), or a re-pin."""
    command = f"python -m fp8ref accept {shlex.quote(str(golden))} {shlex.quote(str(now))} --why '...'"
    return (
        "a change of your own code (your claims' or workloads' keys), or of the stack you now pin: re-pin "
        "with --fp8-update-golden and say why in the commit; a difference of this install alone, accepted "
        f"on purpose, with why: `{command}` (--key PATTERN: only the keys it matches; named for this "
        "install's versions, so it stops matching after an upgrade)"
    )


# --- the run's golden comparisons and its report -------------------------------------------------


def record_golden(
    config: pytest.Config, where: str | Path, device: str, status: str, lines: list[str], now: dict | None = None
) -> None:
    """Keep a golden comparison of the run for its report (``run_report.golden_entry``; its upgrade
    report built only when the run writes ``--fp8-report``)."""
    from fp8ref.harness.profiles.run_report import golden_entry

    wanted = bool(config.getoption("--fp8-report"))
    config.stash.setdefault(_ENTRIES, []).append(golden_entry(where, device, status, lines, now, report=wanted))


def session_started(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session


def hand_to_controller(config: pytest.Config) -> None:
    """An xdist worker: its golden comparisons go to the controller, which writes the report."""
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_KEY] = json.dumps(config.stash.get(_ENTRIES, []), default=str)


def take_from_worker(node: Any) -> None:
    data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if data:
        node.config.stash.setdefault(_ENTRIES, []).extend(json.loads(data))


def write_report(config: pytest.Config, terminalreporter: Any, exitstatus: int) -> None:
    """``--fp8-report``: the run's report, at the end of the run (the controller's, under xdist).
    A run stopped by a usage error checked nothing: no report. A path that cannot be written now
    (it could when the run started) is one ``ERROR:`` line, and a run that passed exits 4."""
    from fp8ref.harness.profiles.run_report import write_run_report

    path = config.getoption("--fp8-report", None)
    if not path or hasattr(config, "workerinput"):
        return
    if exitstatus == pytest.ExitCode.USAGE_ERROR:
        terminalreporter.write_line(f"fp8ref report: {path} not written: the run stopped on a usage error")
        return
    try:
        written = write_run_report(
            path,
            config.stash.get(_ENTRIES, []),
            config.stash.get(REPORT_SECTIONS, []),
            int(exitstatus),
            summary=config.getoption("--fp8-report-format", "full") == "summary",
        )
    except OSError as exc:
        terminalreporter.write_line(f"ERROR: --fp8-report: cannot write {path}: {exc}", red=True, bold=True)
        session = config.stash.get(_SESSION, None)
        if session is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return
    terminalreporter.write_line(f"fp8ref report: {written}")
