"""A team's own golden from its own suite, through fp8ref's pytest plugin alone (fp8ref installed,
no checkout, no conftest): ``--fp8-golden``, ``--fp8-update-golden``, ``--fp8-report`` and the
usage errors before any work, in a team folder outside the checkout. The runs go through
``tests/scripts/team_golden.py``, in the interpreter beside the tests that
every module's ``pytest_each`` runs share (tests/plugins/beside.py); the
pieces they rest on are checked here in-process too (the time limit, the path check, the golden
of the install's whole profile)."""

import json
import re
import signal
import time

import pytest

from tests.common.beside import pytest_each, pytest_each_result

KEY = "workload.fp8team_step:run"  # the target fp8team.step:run, its dot written '_'


def run_beside(folder):
    # (tests/scripts/team_golden.py in the interpreter that every module's pytest_each runs share: its
    # imports paid once)
    return {"runs": pytest_each({"runs": {"script": "team_golden.py", "argv": [str(folder)]}})}


@pytest.fixture
def runs(beside):
    done = pytest_each_result(beside("runs"), "runs")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _line_of(text: str, words: str) -> int:
    """The line of the team's step that holds ``words``, counted from 1."""
    return 1 + next(i for i, line in enumerate(text.splitlines()) if words in line)


def _outcome(run: dict, item: str) -> str:
    """PASSED, FAILED or SKIPPED: the item's line in the run's short summary (-rA)."""
    found = re.search(rf"^(PASSED|FAILED|SKIPPED) ::{re.escape(item)}", run["out"], re.M)
    if found is None and "SKIPPED [1]" in run["out"]:
        return "SKIPPED"  # (a skip's summary line names where it was raised, not the item)
    return found.group(1) if found else f"not run: {run['out'][-2000:]}"


def test_a_teams_workload_is_pinned_in_its_golden_with_its_trace(runs):
    """The team's own suite gets the options, and its workload joins its golden: one key, valued
    with its calls and digest, and its trace's lines beside it, naming the team's lines."""
    missing = runs["missing"]
    assert missing["exit"] == 0 and _outcome(missing, "fp8-golden[ci/fp8.json]") == "SKIPPED", missing["out"]
    assert "--fp8-workload=fp8team.step:run" in missing["out"] and "--fp8-update-golden" in missing["out"]
    pin = runs["pin"]
    assert pin["exit"] == 0 and "pinned " in pin["out"], pin["out"][-2000:] + pin["err"][-2000:]
    pinned = runs["pinned"]
    assert pinned is not None and list(pinned["behaviour"]) == [KEY], pinned
    assert re.fullmatch(r"4 calls, digest [0-9a-f]{16}", pinned["behaviour"][KEY]), pinned["behaviour"]
    cast = _line_of(runs["step"], "# the team's line")
    assert pinned["traces"][KEY][1].endswith(f"| fp8team/step.py:{cast}"), pinned["traces"][KEY]
    assert pinned["versions"]["device"] == "cpu" and pinned["versions"]["torch"], pinned["versions"]
    same = runs["same"]
    assert same["exit"] == 0 and _outcome(same, "fp8-golden[ci/fp8.json]") == "PASSED", same["out"][-2000:]


def test_a_change_to_the_teams_step_fails_its_golden_naming_the_key_and_the_teams_line(runs):
    """The step changed (its weights halved before their cast): the golden item fails naming the
    key and, as the first divergence, the op and the team's line; it says how to accept it; the
    upgrade report carries the same."""
    changed = runs["changed"]
    assert changed["exit"] == 1 and _outcome(changed, "fp8-golden[ci/fp8.json]") == "FAILED", changed["out"][-3000:]
    cast = _line_of(runs["changed_step"], "# the team's line")
    line = next((x for x in changed["out"].splitlines() if x.startswith(f"{KEY}: pinned ")), None)
    assert line is not None, changed["out"][-3000:]
    assert f"first divergence: call #1 (the 2nd FP8 call) aten._to_copy.default (cast) at fp8team/step.py:{cast}:" in (
        line
    ), line
    hint = re.search(r"`python -m fp8ref accept (\S+) (\S+) --why '\.\.\.'`", changed["out"])
    assert hint is not None and hint.group(1).endswith("ci/fp8.json"), changed["out"][-3000:]
    report = runs["report"]
    row = next((x for x in report.splitlines() if x.startswith("| **numerics** |") and f"`{KEY}`" in x), None)
    assert row is not None and "the team's own workload" in row, report[-3000:]
    assert f"- `{KEY}`: call #1 (the 2nd FP8 call) aten._to_copy.default (cast) at fp8team/step.py:{cast}:" in report


@pytest.mark.parametrize(
    "name, words",
    [
        ("report under /proc", "--fp8-report: cannot write /proc/nope/r.md: the folder /proc/nope does not exist"),
        ("report under a missing folder", "--fp8-report: cannot write nope/r.md: the folder "),
        ("report in /proc", "--fp8-report: cannot write /proc/r.md: no file can be created in the folder /proc"),
        ("golden under a missing folder", "--fp8-golden: cannot write "),
        ("golden of another device", "is a golden of device kind 'cuda-sm90', and this install's profile is of 'cpu'"),
        ("pin over a golden of another device", "is a golden of device kind 'cuda-sm90'"),
        ("no module", "--fp8-workload=fp8team.nowhere:run: target 'fp8team.nowhere:run': module 'fp8team.nowhere' "),
        ("no function", "--fp8-workload=fp8team.step:nothing: target 'fp8team.step:nothing': module 'fp8team.step' "),
        ("takes arguments", "--fp8-workload=fp8team.step:takes: target 'fp8team.step:takes': takes(steps) takes "),
        ("claims: no module", "--fp8-claims=fp8team.nowhere:results: target 'fp8team.nowhere:results': module "),
        ("update without a golden", "--fp8-update-golden: needs --fp8-golden=PATH"),
        ("a golden of nothing", "--fp8-golden: nothing for it to hold in your suite"),
    ],
)
def test_a_usage_error_stops_the_run_before_it_collects_with_one_line_and_creates_nothing(runs, name, words):
    """Exit 4 and one ``ERROR:`` line naming the option, before pytest collects (no test ran, no
    workload traced); a folder that is not there is not created, a golden is not overwritten."""
    done = runs[name]
    errors = [line for line in done["err"].splitlines() if line.strip()]
    assert done["exit"] == pytest.ExitCode.USAGE_ERROR and len(errors) == 1, done["err"][-2000:] + done["out"][-2000:]
    assert errors[0].startswith("ERROR: ") and words in errors[0], errors
    assert "collected" not in done["out"] and "passed" not in done["out"], done["out"][-2000:]
    assert not any(f.startswith("nope") for f in done["files"]), done["files"]
    assert done["seconds"] < 5, f"{name}: {done['seconds']:.1f} s before the usage error"
    if name == "pin over a golden of another device":
        assert runs["cuda_left"] is True, "the golden of another device kind was overwritten"


def test_a_hung_workload_is_stopped_by_its_time_limit_with_one_line_and_its_golden_is_not_pinned(runs):
    done = runs["hung"]
    assert done["exit"] == 1 and _outcome(done, "fp8-workload[fp8team.step:hangs]") == "FAILED", done["out"][-2000:]
    assert (
        "--fp8-workload fp8team.step:hangs: stopped after 0.5 s (--fp8-workload-timeout), not finished" in done["out"]
    )
    assert "Traceback" not in done["out"] and done["seconds"] < 30, done["out"][-2000:]
    assert _outcome(done, "fp8-golden[ci/hung.json]") == "FAILED" and "not pinned: " in done["out"], done["out"][-2000:]
    assert "ci/hung.json" not in done["files"], done["files"]


# --- in-process: the pieces ---------------------------------------------------------------------


def test_the_time_limit_stops_a_call_and_gives_an_earlier_timer_back():
    """A timer set before (pytest-timeout's signal method) is set again after, less the time
    spent, with its own handler; and the limit stops a call that runs past it."""
    from fp8ref.harness.workloads.targets import WorkloadTimeout, time_limit

    fired = []
    before = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 50.0)
    try:
        with pytest.raises(WorkloadTimeout, match="a step: stopped after 0.2 s"), time_limit(0.2, "a step"):
            time.sleep(5)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 45 < left <= 50, f"the earlier timer: expected about 50 s left, got {left}"
        with time_limit(5, "a quick step"):
            pass
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 45 and fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_an_output_path_needs_its_folder_there_and_the_check_creates_nothing(tmp_path):
    from fp8ref.pytest_golden import check_output_path

    with pytest.raises(pytest.UsageError, match=re.escape(f"the folder {tmp_path / 'a' / 'b'} does not exist")):
        check_output_path(tmp_path / "a" / "b" / "r.md", "--fp8-report")
    with pytest.raises(pytest.UsageError, match="no file can be created in the folder /proc"):
        check_output_path("/proc/r.md", "--fp8-report")
    assert check_output_path(tmp_path / "r.md", "--fp8-report") == tmp_path / "r.md"
    # a folder of goldens must be there too: none is created
    with pytest.raises(pytest.UsageError, match=re.escape(f"the folder {tmp_path / 'goldens'} does not exist")):
        check_output_path(tmp_path / "goldens", "--fp8-golden", folder=True)
    assert list(tmp_path.iterdir()) == [], "the check left something behind"


def test_the_install_profile_joins_a_teams_golden_only_when_asked(monkeypatch):
    """``--fp8-golden-install``: every family's keys (``profile.collect``) under the team's; without
    it, the install's versions alone besides the team's keys."""
    from fp8ref.harness.profiles import profile

    whole = {"fp8ref_profile": 1, "versions": {"device": "cpu"}, "behaviour": {"cast.x": "saturate"}, "traces": {}}
    monkeypatch.setattr(profile, "collect", lambda device="cpu", **kw: json.loads(json.dumps(whole)))
    asked, failed = profile.of_targets("cpu", install=True)
    assert asked["behaviour"] == {"cast.x": "saturate"} and failed == {}, asked
    alone, _ = profile.of_targets("cpu")
    assert alone["behaviour"] == {} and alone["versions"]["device"] == "cpu" and alone["versions"]["torch"], alone
