"""A golden the user owns, through pytest's own options (``--fp8-golden PATH``,
``--fp8-update-golden``, ``--fp8-report PATH``) as a team pins its stack: missing, pinned,
changed (fails naming the key), accepted with why (passes), a folder of goldens, and the GPU
test's dry run. The runs go through ``tests/scripts/user_golden.py``, in the interpreter beside the
tests that every module's ``pytest_each`` runs share (tests/plugins/beside.py)."""

import json

import pytest

from tests.common.beside import pytest_each, pytest_each_result

KEY = "cast.e4m3fn.bf16.overflow"


def run_beside(folder):
    # (tests/scripts/user_golden.py in the interpreter that every module's pytest_each runs share: its
    # imports paid once)
    return {"runs": pytest_each({"runs": {"script": "user_golden.py", "argv": [str(folder)]}})}


@pytest.fixture
def runs(beside):
    done = pytest_each_result(beside("runs"), "runs")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _only(run: dict) -> tuple[str, str]:
    ((_, outcome, message),) = run["cases"]
    return outcome, message


def test_a_missing_golden_of_ones_own_skips_saying_how_to_pin_it(runs):
    outcome, message = _only(runs["missing"])
    assert runs["missing"]["exit"] == 0 and outcome == "skipped"
    assert "--fp8-golden" in message and "stack.json --fp8-update-golden" in message


def test_update_pins_the_users_path_whole(runs):
    assert _only(runs["pin"])[0] == "skipped" and runs["pinned"] is True


def test_the_json_report_holds_the_golden_status_and_the_end_of_run_sections(runs):
    report = runs["pin_report"]
    assert report["fp8ref_run_report"] == 1 and report["exitstatus"] == 0
    ((entry),) = report["golden"]
    assert entry["status"] == "updated" and entry["golden"].endswith("stack.json") and entry["report"] is None
    observed = report["sections"]["FP8 behaviour observed on this install"]
    assert any(line.startswith("golden profile (cpu): pinned ") for line in observed), observed


def test_one_changed_key_fails_the_golden_test_naming_it_and_the_report_carries_it(runs):
    outcome, message = _only(runs["changed"])
    assert runs["changed"]["exit"] == 1 and outcome == "failure"
    differing = [line.strip() for line in message.splitlines() if ": pinned " in line]
    assert len(differing) == 1 and differing[0].startswith(f"{KEY}: pinned "), message
    whole = runs["changed"]["texts"]["test_behaviour_profile_matches_the_cpu_golden"]
    assert "`python -m fp8ref accept " in whole and "stack.json " in whole, whole  # (how to accept it)
    report = runs["report"]
    assert "### Golden profile (cpu)" in report and "differs" in report
    row = next(line for line in report.splitlines() if f"`{KEY}`" in line)
    assert row.startswith("| **numerics** |"), row


def test_an_accepted_difference_passes_for_that_install(runs):
    assert runs["accept"] == 0
    assert runs["accepted"]["exit"] == 0 and _only(runs["accepted"])[0] == "passed"


def test_a_folder_holds_one_golden_per_device_kind_for_the_gpu_tests_too(runs):
    assert runs["folder_pinned"] == ["cpu.json"]
    assert _only(runs["gpu dry run"])[0] == "passed"
    outcome, message = _only(runs["gpu dry run, missing"])
    assert outcome == "skipped" and "tests/gpu/test_golden_profile.py --fp8-golden" in message


def test_a_golden_of_another_device_kind_is_a_usage_error_before_the_profile(runs):
    """Before: the CPU profile was collected (a minute), then the test failed, exit 1, as if the
    install differed."""
    done = runs["other device"]
    assert done["exit"] == pytest.ExitCode.USAGE_ERROR and done["collected"] == [], done


def test_a_teams_claims_and_workload_join_its_golden_and_a_changed_case_fails_naming_its_key(runs):
    """``--fp8-claims`` and ``--fp8-workload`` with ``--fp8-golden``: the claims' results are
    pinned, one key per case, and the workload's trace, one key; the kernel changed (rounding
    through float16) fails the claims' item, printing the report, and the golden test, whose
    upgrade report names the keys as numerics changes."""
    pinned = runs["claims_pinned"]
    assert len(pinned) == 8 and set(pinned.values()) == {"passed"}, pinned
    case = "just_above_a_midpoint_between_neighbouring_codes_rounds_up_once"
    above = f"claim.fp8team_claims:results.cast_e4m3fn_tensorwise_scale.{case}"
    assert above in pinned, sorted(pinned)
    assert list(runs["workload_pinned"]) == ["workload.fp8team_claims:step"], runs["workload_pinned"]
    assert runs["claims pinned"]["exit"] == 0
    assert [outcome for _, outcome, _ in runs["claims pinned"]["cases"]] == ["skipped", "passed", "passed"]
    changed = {name: (outcome, message) for name, outcome, message in runs["claims changed"]["cases"]}
    assert runs["claims changed"]["exit"] == 1 and len(changed) == 3, changed
    golden = changed["test_behaviour_profile_matches_the_cpu_golden"]
    assert golden[0] == "failure" and "claim.fp8team_claims:results." in golden[1], golden
    row = next(line for line in runs["claims_report"].splitlines() if f"`{above}`" in line)
    assert row.startswith("| **numerics** |") and "differs: its codes" in row, row
    item = changed["fp8-claims[fp8team_claims:results]"]
    whole_item = runs["claims changed"]["texts"].get("fp8-claims[fp8team_claims:results]", item[1])
    # (the whole text: junit cuts the message, and a long versions line, a torchao that does not import, fills it)
    assert item[0] == "failure" and "FAILED  cast e4m3fn tensorwise (scale): just above a midpoint" in whole_item, item
    # the workload quantizes through the changed kernel: still within the definition (a float16 value cast
    # once), but other codes, which its golden key says, with the line where its trace first parts
    assert changed["fp8-workload[fp8team_claims:step]"][0] == "passed", changed
    whole = runs["claims changed"]["texts"]["test_behaviour_profile_matches_the_cpu_golden"]
    assert "workload.fp8team_claims:step: pinned " in whole and "at fp8team_claims.py:" in whole, whole
