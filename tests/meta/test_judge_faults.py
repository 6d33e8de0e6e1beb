"""The judge itself: a green run means checked. Three faults that used to read as "the install
refused" (and skip) must fail the run instead, in several families:

- a typo in a check (``out.detatch()``): the check's own code, mutated in a copy of its function,
  run through the real test function, which must fail, not skip;
- a library's assertion on an input it supports: a stand-in whose code sits in the library's
  folder (so the error is raised inside the install) asserts on a supported input;
- a ``torch._check`` that starts refusing a case the golden says runs: the check fails, and the
  profile's key for the path differs from the golden, so the golden test fails too.

Each is judged by the one rule (fp8ref.harness.stack.refusals)."""

from __future__ import annotations

import copy
import inspect
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import torch

from fp8ref.harness.ao import mx_modes
from fp8ref.harness.gemm import grouped, grouped_bounds
from fp8ref.harness.profiles.golden import compare_with_golden
from fp8ref.harness.profiles.profile_file import load
from fp8ref.harness.stack.refusals import is_refusal
from fp8ref.reference.formats import E4M3FN
from tests.common.inside_install import inside
from tests.common.paths import GOLDEN


def _outcome(test: Callable[..., None], *args: Any) -> str:
    """``passed``, ``skipped: <reason>`` or ``failed: <Type>`` for ``test(*args, skip_if_refused)``,
    the ``skip_if_refused`` fixture's own behaviour reproduced (pytest.skip)."""

    def skip_if_refused(answer: str | None, what: str) -> None:
        if answer is not None:
            pytest.skip(f"cannot do {what}: {answer}")

    try:
        test(*args, skip_if_refused)
    except pytest.skip.Exception as exc:
        return f"skipped: {exc}"
    except Exception as exc:  # noqa: BLE001 - the outcome is the subject
        return f"failed: {type(exc).__name__}"
    return "passed"


def _mutated(module: ModuleType, name: str, old: str, new: str) -> Callable[..., Any]:
    """``module.name`` with ``old`` replaced by ``new`` in its source (a typo), compiled under the
    module's file name so its frames are where the check's are."""
    source = textwrap.dedent(inspect.getsource(getattr(module, name)))
    if old not in source:
        pytest.fail(f"{module.__name__}.{name} no longer holds {old!r}: update the typo this test injects")
    namespace = dict(vars(module))
    first_line = inspect.getsourcelines(getattr(module, name))[1]
    code = compile("\n" * (first_line - 1) + source.replace(old, new), inspect.getfile(module), "exec")
    exec(code, namespace)  # noqa: S102 - the check's own source, with one typo
    return namespace[name]


# --- a typo in a check ---------------------------------------------------------------------------
def _grouped_test(skip_if_refused: Any) -> None:  # tests/cpu/install/test_grouped_gemm.py's body
    refused, problem = grouped_bounds.check_grouped_mm("cpu", "ragged")
    skip_if_refused(refused, "torch._grouped_mm on cpu")
    assert problem is None, problem


def _mx_test(skip_if_refused: Any) -> None:  # tests/cpu/install/test_mx_modes.py's, on the reference
    from tests.meta.test_mx_mode_faults import right

    r = mx_modes.check_mx_mode(right, E4M3FN, "floor", 32)
    skip_if_refused(r.refused, "MX floor, blocks of 32")
    assert r.problem is None, r.problem


TYPOS = {
    "grouped GEMMs: the step": (grouped_bounds, "run", "out.detach()", "out.detatch()", _grouped_test),
    "grouped GEMMs: the comparison": (
        grouped_bounds,
        "_compare",
        "got[name].detach()",
        "got[name].detatch()",
        _grouped_test,
    ),
    "MX scale modes: the scales read back": (mx_modes, "check_mx_mode", "scale.reshape(", "scale.reshap(", _mx_test),
}


@pytest.mark.parametrize("family", list(TYPOS))
def test_a_typo_in_a_check_fails_and_never_skips(family, monkeypatch):
    module, name, old, new, test = TYPOS[family]
    assert _outcome(test) == "passed", "the check fails without the typo: nothing to show"
    monkeypatch.setattr(module, name, _mutated(module, name, old, new))
    assert _outcome(test) == "failed: AttributeError", f"{family}: a typo ({new}) did not fail the test"


def test_a_refusal_shaped_error_inside_a_check_fails_it(monkeypatch):
    """The check's own code calls torch in a way torch declines (a float8 sum: 'not implemented
    for'), which by its words is a refusal: the check runs unguarded, so the test fails rather
    than skips as "the install refused"."""
    old, new = "got[name].detach().double().cpu()", "got[name].detach().to(torch.float8_e4m3fn).sum().double().cpu()"
    assert _outcome(_grouped_test) == "passed"
    monkeypatch.setattr(grouped_bounds, "_compare", _mutated(grouped_bounds, "_compare", old, new))
    assert _outcome(_grouped_test) == "failed: NotImplementedError"


def test_a_wrong_call_in_a_profile_probe_fails_the_profile(monkeypatch):
    """Python's own TypeError on fp8ref's line ("takes exactly one argument") is fp8ref's mistake,
    never recorded as the install's failure or refusal."""
    from fp8ref.harness.casts import profile_keys

    old, new = '"|".join(r.nan_codes)', '"|".join(r.nan_codes, "|")'
    monkeypatch.setattr(profile_keys, "cast_keys", _mutated(profile_keys, "cast_keys", old, new))
    with pytest.raises(TypeError, match="join"):
        profile_keys.cast_keys("cpu")


def test_a_keyword_typo_in_a_survey_of_torchs_ops_fails_it(monkeypatch):
    """A survey takes what torch raises for a float8 input as the op declining it, but not a wrong
    call in fp8ref's own code ("unexpected keyword argument")."""
    from fp8ref.harness.native import native_checks
    from fp8ref.reference.formats import E5M2

    old = "torch.full((4,), v, dtype=torch.float64, device=device)"
    new = "torch.full((4,), v, dtypes=torch.float64, device=device)"
    monkeypatch.setattr(native_checks, "_write_paths", _mutated(native_checks, "_write_paths", old, new))
    with pytest.raises(TypeError, match="dtypes"):
        native_checks.check_written(E5M2)


@pytest.mark.needs("transformers")
def test_a_typo_in_the_transformers_loader_check_fails(monkeypatch):
    from fp8ref.harness.hf import block_checks

    monkeypatch.setattr(
        block_checks, "judge_loaded", _mutated(block_checks, "judge_loaded", "got.dtype != dtype", "got.dtyp != dtype")
    )
    with pytest.raises(AttributeError, match="dtyp"):
        block_checks.check_loader(torch.float32, "float")


def test_a_typo_in_a_profile_probe_fails_the_profile(monkeypatch):
    from fp8ref.harness.casts import profile_keys

    old, new = "r.overflow_mode", "r.overflowmode"
    monkeypatch.setattr(profile_keys, "cast_keys", _mutated(profile_keys, "cast_keys", old, new))
    with pytest.raises(AttributeError, match="overflowmode"):
        profile_keys.cast_keys("cpu")


def test_a_typo_in_a_checkpoint_way_fails(monkeypatch):
    from fp8ref.harness.state import keeping

    monkeypatch.setattr(keeping, "check_kept", _mutated(keeping, "check_kept", "fields(got)", "fields(got.detatch())"))
    with pytest.raises(AttributeError, match="detatch"):
        keeping.check_kept(torch.zeros(4, dtype=torch.uint8).view(torch.float8_e4m3fn))


# --- a library's assertion on an input it supports -------------------------------------------------
def test_a_library_assertion_on_a_supported_input_fails():
    asserts = inside(
        "torch",
        "def f(a, b, offs):\n"
        "    assert bool((offs[1:] >= offs[:-1]).all()) and offs.numel() < 3, 'offsets look unsorted'\n"
        "    return torch._grouped_mm(a, b, offs=offs)\n",
    )
    with pytest.raises(AssertionError, match="offsets look unsorted") as info:
        grouped_bounds.check_grouped_mm("cpu", "aligned", fn=asserts)
    assert not is_refusal(info.value)


@pytest.mark.needs("torchao")
def test_a_torchao_assertion_on_a_supported_block_size_fails():
    from fp8ref.harness.ao import torchao_compat as ao

    asserting_to_mx = inside(
        "torchao",
        "def f(x, fmt, block_size, mode, to_mx=None):\n"
        "    assert mode != 'rceil', 'scale computation drifted'\n"
        "    return to_mx(x, fmt, block_size, mode)\n",
    )

    def to_mx(x, fmt, block_size, mode):
        return asserting_to_mx(x, fmt, block_size, mode, to_mx=ao.to_mx)

    with pytest.raises(AssertionError, match="scale computation drifted"):
        mx_modes.check_mx_mode(to_mx, E4M3FN, "rceil", 32)
    assert mx_modes.check_mx_mode(to_mx, E4M3FN, "floor", 32).refused is None


# --- a torch._check that starts refusing a case the golden says runs ------------------------------
def _checking_grouped_mm(real: Callable[..., torch.Tensor], words: str) -> Callable[..., torch.Tensor]:
    def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None, **kw: Any) -> torch.Tensor:
        assert offs is not None
        sizes = torch.diff(offs, prepend=offs.new_zeros(1))
        torch._check(bool((sizes % 16 == 0).all()), lambda: words)
        return real(a, b, offs=offs, **kw)

    return grouped_mm


@pytest.mark.parametrize(
    "words,how_the_check_ends",
    [
        ("Expected every group of tokens to be a multiple of 16", "failed: RuntimeError"),
        ("groups that are not a multiple of 16 are not supported", "skipped"),
    ],
    ids=["in other words", "in declining words"],
)
def test_a_torch_check_refusing_a_case_the_golden_runs_fails_the_run(words, how_the_check_ends, monkeypatch):
    pinned = load(GOLDEN / "cpu.json")
    key = "grouped.torch._grouped_mm"
    if pinned["behaviour"].get(key) != "runs":
        pytest.fail(f"the golden pins {key} = {pinned['behaviour'].get(key)!r}: this test needs a case it runs")
    monkeypatch.setattr(torch, "_grouped_mm", _checking_grouped_mm(torch._grouped_mm, words))
    assert _outcome(_grouped_test).startswith(how_the_check_ends)
    now = copy.deepcopy(pinned)  # the golden's own profile, with this key as the install now answers it
    now["behaviour"] |= {key: grouped.outcomes("cpu", torchao=False)[key]}
    status, lines = compare_with_golden(GOLDEN, "cpu", now=now)
    assert status == "differs" and any(line.startswith(key) for line in lines), (status, lines)
