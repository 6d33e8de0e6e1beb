"""A team's own FP8 functions through the claims adapter (``fp8ref.harness.claims``): correct
stand-ins of a team's quantize kernel (torchao's convention and TransformerEngine's, tensorwise
and rowwise, written with torch's own cast, which tests/cpu/install holds to the codec) and of a
TE-style delayed-scaling update pass every case; known failures, the report and bad arguments.
Wrong kernels caught, naming the case: tests/meta/test_claim_faults.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

from fp8ref.harness.claims import (
    CastClaim,
    ClaimResult,
    DelayedScalingClaim,
    check_cast_claim,
    check_delayed_scaling_claim,
    failures,
    read_known,
    report,
)
from tests.common.beside import pytest_each, pytest_each_result

pytestmark = pytest.mark.cpu

DTYPES = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
MAX = {"e4m3fn": 448.0, "e5m2": 57344.0}


def team_quantize(fmt: str = "e4m3fn", rowwise: bool = False, scale_inv: bool = False) -> Callable[..., Any]:
    """A team's kernel as many write it: amax in float64, torchao's formula, multiply, clamp, cast."""

    def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        amax = (x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax()).double().clamp(min=1e-12)
        scale = (MAX[fmt] / amax).float()
        codes = (x * scale).clamp(-MAX[fmt], MAX[fmt]).to(DTYPES[fmt])
        return codes, ((1.0 / scale.double()).float() if scale_inv else scale)

    return quantize


class TeamDelayedScaling:
    """A team's TE-style update: record, then scale from the history's max (TE's float32 steps),
    an infinite scale (an amax below 448 / float32's max) clamped to float32's max as TE does."""

    def __init__(self, history_len: int = 16, fp8_max: float = 448.0) -> None:
        self.history = torch.zeros(history_len)
        self.scale = torch.tensor(1.0)
        self.fp8_max = fp8_max

    def update(self, amax: torch.Tensor) -> torch.Tensor:
        self.history = torch.roll(self.history, 1)
        self.history[0] = amax
        top = self.history.max()
        if torch.isfinite(top) and top > 0:
            self.scale = self.clamped(top.reciprocal() * self.fp8_max)
        return self.scale

    @staticmethod
    def clamped(scale: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.isinf(scale), torch.finfo(torch.float32).max, scale)


@pytest.mark.parametrize(
    "claim, fn, examples",
    [
        (CastClaim(), team_quantize(), 100),
        (CastClaim("e5m2"), team_quantize("e5m2"), 25),
        (CastClaim(granularity="rowwise"), team_quantize(rowwise=True), 25),
        (CastClaim(convention="scale_inv"), team_quantize(scale_inv=True), 25),
    ],
    ids=["tensorwise", "e5m2", "rowwise", "scale_inv"],
)
def test_a_correct_quantize_kernel_passes_every_case(claim, fn, examples):
    """(The default 100 generated inputs once; 25 for the other claims: hypothesis's drawing costs
    about 10 ms an input.)"""
    results = check_cast_claim(fn, claim, examples=examples)
    assert len(results) == 9 and not failures(results), report(results)


def test_a_correct_delayed_scaling_update_passes_every_case():
    results = check_delayed_scaling_claim(TeamDelayedScaling, DelayedScalingClaim())
    assert len(results) == 7 and not failures(results), report(results)


def test_the_claim_matters_a_rowwise_kernel_is_not_a_tensorwise_one():
    results = check_cast_claim(team_quantize(rowwise=True), CastClaim())
    assert failures(results) and all("scale: expected 1 value(s) (tensorwise)" in r.problem for r in failures(results))


def test_a_known_failure_is_reported_with_its_why_and_does_not_fail(tmp_path):
    def f16(x):
        codes, scale = team_quantize()(x)
        return (x * scale).clamp(-448, 448).to(torch.float16).to(torch.float8_e4m3fn), scale

    failed = {r.case for r in failures(check_cast_claim(f16, CastClaim(), examples=25))}
    path = tmp_path / "known.json"
    path.write_text(json.dumps({case: "our kernel rounds through float16 (ticket 12)" for case in failed}))
    results = check_cast_claim(f16, CastClaim(), known=read_known(path), examples=25)
    assert failed and not failures(results)
    text = report(results)
    assert text.startswith(f"fp8ref claims on torch {torch.__version__}") and f"{len(failed)} known failures" in text
    assert text.count("(known: our kernel rounds through float16 (ticket 12))") == len(failed)


def test_a_kernel_that_raises_is_a_failure_naming_the_error():
    def broken(x):
        raise RuntimeError("CUDA kernel not built")

    results = check_cast_claim(broken, CastClaim(), examples=0)  # (the named cases: hypothesis may be absent)
    assert len(failures(results)) == 8
    assert all(r.problem.startswith("the function raised RuntimeError: CUDA kernel not built") for r in results)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: CastClaim(fmt="e4m3"), "fmt: expected one of"),
        (lambda: CastClaim(granularity="blockwise"), "granularity: expected one of"),
        (lambda: CastClaim(convention="inverse"), "convention: expected one of"),
        (lambda: DelayedScalingClaim(history_len=0), "history_len: expected a positive int"),
        (lambda: check_cast_claim("quantize", CastClaim()), "fn: expected the quantize function"),  # type: ignore[arg-type]
        (lambda: check_cast_claim(team_quantize(), "tensorwise"), "claim: expected a CastClaim"),  # type: ignore[arg-type]
        (
            lambda: check_delayed_scaling_claim(TeamDelayedScaling, CastClaim()),  # type: ignore[arg-type]
            "claim: expected a DelayedScalingClaim",
        ),
    ],
)
def test_bad_arguments_are_clear_errors_naming_them(make, words):
    with pytest.raises((TypeError, ValueError), match=words):
        make()


def test_a_known_failures_file_that_is_not_one_is_a_clear_error(tmp_path):
    path = tmp_path / "known.json"
    path.write_text(json.dumps({"a case": ""}))
    with pytest.raises(ValueError, match="expected a JSON object of case name -> why"):
        read_known(path)
    with pytest.raises(ValueError, match="cannot read"):
        read_known(tmp_path / "none.json")


_TEAM_TARGETS = """
from fp8ref.harness.claims import ClaimResult


def good():
    return [ClaimResult("my cast", "a case (1)"), ClaimResult("my cast", "another.case", "got 0x01, want 0x02")]


def not_results():
    return {"a case": "passed"}


def nothing():
    return []
"""


@pytest.fixture
def team_targets(tmp_path, monkeypatch):
    from fp8ref.harness.claims import targets

    (tmp_path / "fp8team_targets.py").write_text(_TEAM_TARGETS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fp8team_targets", raising=False)
    targets.forget()
    yield tmp_path
    targets.forget()


def test_a_teams_claims_become_one_profile_key_per_case(team_targets):
    from fp8ref.harness.claims import profile_keys, targets
    from fp8ref.harness.stack.probing import Where

    got = profile_keys.collect(Where(claims=("fp8team_targets:good",)))
    assert got == {
        "claim.fp8team_targets:good.my_cast.a_case_1": "passed",
        "claim.fp8team_targets:good.my_cast.another_case": "differs: got 0x01, want 0x02",
    }
    not_run = ClaimResult("c", "generated", not_run="hypothesis is not installed")
    assert profile_keys.value(not_run) == "missing: hypothesis is not installed"
    with pytest.raises(ValueError, match="have one key, claim.t:f.c.a_b"):
        profile_keys.keys("t:f", [ClaimResult("c", "a b"), ClaimResult("c", "a.b")])
    bad = {"not_results": "expected a list of ClaimResult", "nothing": "returned no results"}
    for name, words in bad.items():
        with pytest.raises(targets.TargetError, match=words):
            targets.claim_results(f"fp8team_targets:{name}")


def test_the_profile_command_adds_a_teams_claims_and_refuses_a_bad_target(team_targets, monkeypatch, capsys):
    from fp8ref.__main__ import main
    from fp8ref.harness.profiles import families

    # (the claims' family alone: the others' keys are the golden tests' subject)
    monkeypatch.setattr(families, "FAMILIES", [families.Family("fp8ref.harness.claims")])
    out = team_targets / "p.json"
    assert main(["profile", "--claims", "fp8team_targets:good", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["behaviour"]["claim.fp8team_targets:good.my_cast.a_case_1"] == "passed"
    assert main(["profile", "--claims", "fp8team_targets:nothing", "--out", str(team_targets / "q.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "error: --claims: target 'fp8team_targets:nothing': returned no results, so nothing was checked", err
    assert not (team_targets / "q.json").exists()


_USER_CLAIMS = """
import torch

from fp8ref.harness.claims import CastClaim, check_cast_claim


def quantize(x, through_float16=False):
    scale = (448.0 / x.abs().amax().double().clamp(min=1e-12)).float()
    y = (x * scale).clamp(-448.0, 448.0)
    return (y.to(torch.float16) if through_float16 else y).to(torch.float8_e4m3fn), scale


def good():
    return check_cast_claim(quantize, CastClaim(), examples=10)


def bad():
    return check_cast_claim(lambda x: quantize(x, True), CastClaim(), examples=10)
"""


def run_beside(folder):
    (folder / "fp8user_claims.py").write_text(_USER_CLAIMS)
    (folder / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    # a team's own suite outside the checkout: the options come with the installed package's plugin
    argv = ["-p", "no:randomly", "-p", "no:cacheprovider", "-rA", "-q", "test_nothing.py"]
    argv += ["--fp8-claims=fp8user_claims:good", "--fp8-claims=fp8user_claims:bad"]
    return {"claims": pytest_each({"suite": {"argv": argv, "cwd": str(folder)}})}


def test_the_pytest_plugin_checks_a_teams_claims_in_its_own_suite(beside):
    """``--fp8-claims`` adds one item per target: the right kernel passes; the one rounding through
    float16 fails, its report naming the cases that differ."""
    done = pytest_each_result(beside("claims"), "suite")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "PASSED ::fp8-claims[fp8user_claims:good]" in out and "FAILED ::fp8-claims[fp8user_claims:bad]" in out, out
    assert "fp8user_claims:bad: 4 case(s) differ" in out, out
    assert "FAILED  cast e4m3fn tensorwise (scale): just above a midpoint between neighbouring codes" in out, out
    assert "1 failed, 2 passed" in out, out


def test_a_bad_argument_the_teams_function_hands_fp8ref_is_a_usage_error_naming_it(team_targets, capsys):
    """The team's function calling a check with a bad argument: exit 2, the check's words."""
    from fp8ref.__main__ import main

    (team_targets / "fp8team_bad.py").write_text(
        "from fp8ref.harness.claims import CastClaim, check_cast_claim\n\n"
        "def results():\n"
        "    return check_cast_claim(lambda x: x, CastClaim(), examples=-1)\n"
    )
    assert main(["profile", "--claims", "fp8team_bad:results", "--out", str(team_targets / "p.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: target 'fp8team_bad:results' raised ValueError: examples: expected"), err


def test_two_targets_giving_one_key_and_claims_that_are_no_list_are_clear_errors(team_targets):
    from fp8ref.harness.claims import profile_keys
    from fp8ref.harness.profiles.profile import collect, with_claims
    from fp8ref.harness.stack.probing import Where

    with pytest.raises(ValueError, match="the targets 'fp8team_targets:good' and 'fp8team_targets:good' give one key"):
        profile_keys.collect(Where(claims=("fp8team_targets:good", "fp8team_targets:good")))
    for call in (lambda: collect(claims="fp8team_targets:good"), lambda: with_claims({"behaviour": {}}, "x:y")):
        with pytest.raises(TypeError, match="claims: expected a list or tuple of 'pkg.module:function' targets"):
            call()


@pytest.mark.needs("hypothesis")
def test_a_difference_the_team_function_does_not_repeat_is_reported_not_raised():
    """A function whose answer changes on a repeat (state, a racy kernel): hypothesis's replay of
    the input finds no difference, and the one found is still the result."""
    from hypothesis import strategies as st

    from fp8ref.harness.claims import generated

    seen = []

    def judge(values):
        seen.append(values)
        return "differs the first time" if len(seen) == 1 else None

    found = generated.search(judge, st.lists(st.floats(0, 1), min_size=1, max_size=2), 20, 0)
    assert found is not None and found[1] == "differs the first time", found


def test_without_hypothesis_the_generated_case_is_not_run_never_passed(monkeypatch):
    from fp8ref.harness.claims import generated

    real = generated.importlib.util.find_spec
    monkeypatch.setattr(
        generated.importlib.util, "find_spec", lambda name, *a: None if name == "hypothesis" else real(name, *a)
    )
    (result,) = [r for r in check_cast_claim(team_quantize(), CastClaim()) if r.case.startswith("hypothesis")]
    assert result.not_run is not None and not result.failed and result.line().startswith("not run "), result
    assert report([result]).splitlines()[0].endswith("0 failed, 0 known failures, 1 not run")


def test_two_functions_held_to_one_claim_are_told_apart_by_label_else_refused_naming_label(team_targets, capsys):
    """Without ``label=``, two kernels under one claim give the same case names: the target is a
    usage error saying so before the profile is collected; with it, each result names its kernel."""
    from fp8ref.__main__ import main
    from fp8ref.harness.claims import targets

    (team_targets / "fp8team_two.py").write_text(
        "from fp8ref.harness.claims import CastClaim, check_cast_claim\n"
        "from tests.cpu.tools.test_claims import team_quantize\n\n"
        "def unlabelled():\n"
        "    return [*check_cast_claim(team_quantize(), CastClaim(), examples=0),\n"
        "            *check_cast_claim(team_quantize(), CastClaim(), examples=0)]\n\n"
        "def labelled():\n"
        "    return [*check_cast_claim(team_quantize(), CastClaim(), examples=0, label='triton'),\n"
        "            *check_cast_claim(team_quantize(), CastClaim(), examples=0, label='cuda')]\n\n"
        "def takes(x):\n"
        "    return []\n"
    )
    assert main(["profile", "--claims", "fp8team_two:unlabelled", "--out", str(team_targets / "p.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "have one key" in err and "give each function its label= in check_*_claim" in err, err
    got = targets.claim_results("fp8team_two:labelled")
    assert {r.claim for r in got} == {"triton: cast e4m3fn tensorwise (scale)", "cuda: cast e4m3fn tensorwise (scale)"}
    with pytest.raises(targets.TargetError, match=r"takes\(x\) takes arguments, expected a function called with none"):
        targets.claim_results("fp8team_two:takes")
    with pytest.raises(ValueError, match="label: expected a non-empty name"):
        check_cast_claim(team_quantize(), CastClaim(), examples=0, label=" ")


def test_a_known_failure_may_be_named_as_the_report_prints_it(tmp_path):
    def f16(x):
        codes, scale = team_quantize()(x)
        return (x * scale).clamp(-448, 448).to(torch.float16).to(torch.float8_e4m3fn), scale

    case = "a row of zeros among others"
    full = {f"kernel: {CastClaim().name}: {case}": "ticket 12"}
    results = {r.case: r for r in check_cast_claim(f16, CastClaim(), examples=0, label="kernel", known=full)}
    assert results[case].problem and results[case].known == "ticket 12" and not results[case].failed
    other = {f"other: {CastClaim().name}: {case}": "another kernel's"}
    results = {r.case: r for r in check_cast_claim(f16, CastClaim(), examples=0, label="kernel", known=other)}
    assert results[case].failed  # (another function's known failure is not this one's)
