"""The tracer (``fp8ref.harness.trace``, ``python -m fp8ref trace``): a small float8 program and a
torchao Float8Linear training step traced clean on this install, each op held to the check of its
kind; the digest; the command line's exit codes, and the pytest plugin (``--fp8-workload``, the
``fp8_trace`` fixture), on a user's files outside the checkout. The faults it catches are
tests/meta/test_trace_faults.py."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from fp8ref.__main__ import main
from fp8ref.harness.stack import probes
from fp8ref.harness.trace import trace
from tests.common.beside import pytest_each, pytest_each_result

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _program(scaled_mm: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 32, generator=g) * 64  # (some past 448: the cast's overflow rule is observed)
    a = x.to(E4M3)
    b = torch.randn(32, 16, generator=g).to(E4M3)
    c = torch.cat([a.t(), b], dim=1)  # a transposed input
    d = torch.empty(32, 16, dtype=E4M3)
    d.copy_(a.t())  # copy_ of a transposed tensor
    e = a * a  # two e4m3fn tensors
    a.to(E5M2).to(torch.bfloat16)
    x.to(torch.bfloat16).to(E5M2)
    if scaled_mm:
        torch._scaled_mm(a, b.t().contiguous().t(), torch.tensor(0.5), torch.tensor(2.0), out_dtype=torch.bfloat16)
    return torch.cat([c, e.t()], dim=1)


def _scaled_mm_runs() -> bool:
    return probes.scaled_mm_refusal("tensorwise", torch.bfloat16, "cpu") is None


def test_a_small_float8_program_traces_clean():
    got = trace(_program, _scaled_mm_runs())
    assert not got.violations, "\n".join(v.report() for v in got.violations)
    kinds = {(r.op, r.kind) for r in got.records}
    want = {
        ("aten._to_copy.default", "cast"),
        ("aten._to_copy.default", "values"),
        ("aten.t.default", "movement"),
        ("aten.cat.default", "movement"),
        ("aten.copy_.default", "movement"),
        ("aten.mul.Tensor", "values"),
    } | ({("aten._scaled_mm.default", "scaled_mm")} if _scaled_mm_runs() else set())
    assert want <= kinds, sorted(kinds)
    # every call checked but the uninitialized empty, whose reason is given
    assert [r.op for r in got.unchecked] == ["aten.empty.memory_format"], [r.line() for r in got.unchecked]
    assert {v for r in got.records for v in r.observed.values()} & {"saturate", "nonsaturate"}, "overflow unobserved"
    assert len(got.summary()) == len({r.op for r in got.records})


def test_the_digest_pins_the_codes_and_moves_with_them():
    first, again = trace(_program, False).digest(), trace(_program, False).digest()
    assert first == again
    assert all("#" in line for line in first if "-> float8" in line and "empty" not in line)

    def other() -> None:
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(0)) * 64
        x[0, 0] = -x[0, 0]  # one code changed (its sign)
        x.to(E4M3)

    assert trace(other).digest()[0] != first[0]
    assert trace(other).digest()[0].split("#")[0] == first[0].split("#")[0]  # (same op, dtypes, shapes)


@pytest.mark.needs("torchao")
def test_a_float8_linear_training_step_traces_clean(skip_if_refused):
    """torchao's Float8Linear (tensorwise: E4M3 forward, E5M2 gradients), forward and backward:
    seen through its Float8TrainingTensor, every cast, view and scaled GEMM it runs is checked."""
    skip_if_refused(probes.scaled_mm_refusal("tensorwise", torch.float32, "cpu"), "Float8Linear's _scaled_mm")
    from torchao.float8 import convert_to_float8_training

    torch.manual_seed(0)
    layers = torch.nn.Linear(32, 64, bias=False), torch.nn.ReLU(), torch.nn.Linear(64, 16, bias=False)
    model = torch.nn.Sequential(*layers)
    convert_to_float8_training(model)
    x = torch.randn(16, 32, requires_grad=True)

    def step() -> None:
        model(x).pow(2).mean().backward()

    got = trace(step)
    assert not got.violations, "\n".join(v.report() for v in got.violations)
    assert not got.unchecked, [r.line() for r in got.unchecked]
    count = {}
    for r in got.records:
        count[r.kind] = count.get(r.kind, 0) + 1
    # 2 layers x 3 GEMMs (output, grad input, grad weight), each with its 2 operand casts
    assert count.get("scaled_mm") == 6 and count.get("cast") == 12, count
    assert {r.outputs[0].dtype for r in got.records if r.kind == "cast"} == {"float8_e4m3fn", "float8_e5m2"}
    assert {types for _, types, _ in got.through} == {"Float8TrainingTensor"}, got.through
    assert all(r.site.startswith(__file__) for r in got.records), {r.site for r in got.records}


# --- python -m fp8ref trace ------------------------------------------------------------------------------
_USER_FILE = """
import torch

def clean():
    x = torch.linspace(-500, 500, 64).reshape(8, 8)
    torch.cat([x.to(torch.float8_e4m3fn).t(), x.to(torch.float8_e5m2).to(torch.float8_e4m3fn)])

def nofp8():  # no float8 anywhere: nothing for fp8ref to check
    return torch.ones(4) * 2

def broken():  # a user's own CPU kernel for aten's mul: e4m3fn products rounded toward zero
    import warnings

    from fp8ref.reference.codec import encode
    from fp8ref.reference.formats import E4M3FN

    e4m3 = torch.float8_e4m3fn

    def mul(a, b):
        if isinstance(b, torch.Tensor) and a.dtype == b.dtype == e4m3:
            fa, fb = torch.empty(a.shape).copy_(a), torch.empty(b.shape).copy_(b)
            wide = torch.addcmul(torch.full(a.shape, -0.0), fa, fb)
            return encode(wide, E4M3FN, saturate=True, rounding="rtz").view(e4m3)
        if a.dtype == torch.bool and torch.as_tensor(b).dtype == torch.bool:
            return a & b
        shape = torch.broadcast_shapes(a.shape, torch.as_tensor(b).shape)
        return torch.addcmul(torch.full(shape, -0.0, dtype=torch.result_type(a, b)), a, b)

    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.impl("mul.Tensor", mul, "CPU")
    a = torch.tensor([1.125, 2.0]).to(e4m3)
    b = torch.tensor([1.75, 0.5]).to(e4m3)
    a * b  # the line a violation names
"""


_USER_TESTS = """
import torch

from fp8user_prog import broken, clean


def test_a_clean_call_passes_and_returns_its_trace(fp8_trace):
    got = fp8_trace(clean)
    assert any(r.op == "aten.cat.default" for r in got.records)


def test_a_violating_call_fails(fp8_trace):
    fp8_trace(broken)
"""


def run_beside(folder):
    (folder / "fp8user_prog.py").write_text(textwrap.dedent(_USER_FILE))
    (folder / "test_fp8user.py").write_text(textwrap.dedent(_USER_TESTS))
    # one interpreter outside the checkout: python -m fp8ref trace, and a team's own suite, whose
    # fp8ref plugin comes with the installed package (its entry point), not from this conftest
    suite = ["-p", "no:randomly", "-p", "no:cacheprovider", "-rA", "-q", "test_fp8user.py"]
    workloads = [f"--fp8-workload=fp8user_prog:{name}" for name in ("clean", "broken", "nofp8")]
    runs = {  # (-k test_ would deselect the workloads' items, named fp8-workload[...], were they not asked for)
        "suite": {"argv": [*suite, "-k", "test_", *workloads], "cwd": str(folder)},
        "broken": {"argv": ["trace", "fp8user_prog:broken"], "cwd": str(folder), "fp8ref": True},
        "no function": {"argv": [*suite, "--fp8-workload=fp8user_prog"], "cwd": str(folder)},
        "no module": {"argv": [*suite, "--fp8-workload=fp8user_nowhere:step"], "cwd": str(folder)},
    }
    return {"user": pytest_each(runs)}


def _users_line() -> int:
    return 1 + textwrap.dedent(_USER_FILE).splitlines().index("    a * b  # the line a violation names")


def test_the_command_traces_a_users_function_and_exits_0_when_clean(tmp_path, monkeypatch, capsys):
    (tmp_path / "fp8user_prog.py").write_text(textwrap.dedent(_USER_FILE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "fp8user_prog", raising=False)
    assert main(["trace", "fp8user_prog:clean"]) == 0
    out = capsys.readouterr().out
    assert "fp8user_prog:clean: " in out and "0 violation(s)" in out, out
    assert "aten.cat.default" in out and "aten._to_copy.default" in out, out


def test_the_command_exits_1_naming_the_op_and_the_users_line_on_a_violation(beside):
    done = pytest_each_result(beside("user"), "broken")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 violation(s)" in done.stdout, done.stdout
    assert "violation: #" in done.stdout and "aten.mul.Tensor [values: violation]" in done.stdout, done.stdout
    assert f"fp8user_prog.py:{_users_line()}:" in done.stdout, done.stdout
    assert "got 0x3f (1.875), want 0x40 (2.0)" in done.stdout, done.stdout


def test_the_pytest_plugin_traces_each_workload_and_serves_the_fixture_in_a_teams_own_suite(beside):
    """pytest run in a folder outside the checkout, with no conftest: --fp8-workload adds one item
    per workload, which -k does not deselect, and fp8_trace is a fixture, both from the installed
    package's entry point. A workload with no float8 op fails: nothing was checked."""
    done = pytest_each_result(beside("user"), "suite")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "PASSED ::fp8-workload[fp8user_prog:clean]" in out, out
    assert "FAILED ::fp8-workload[fp8user_prog:broken]" in out, out
    assert "FAILED ::fp8-workload[fp8user_prog:nofp8]" in out, out
    assert "fp8user_prog:nofp8: no op read or wrote a float8 dtype, so nothing was checked" in out, out
    assert "PASSED test_fp8user.py::test_a_clean_call_passes_and_returns_its_trace" in out, out
    assert "FAILED test_fp8user.py::test_a_violating_call_fails" in out, out
    assert "3 failed, 2 passed" in out and "deselected" not in out, out
    # each failure names the op and the user's line
    assert out.count(f"fp8user_prog.py:{_users_line()}:") >= 2 and "aten.mul.Tensor" in out, out


def test_a_bad_workload_is_one_clear_line_not_a_traceback(beside):
    """A target without ':', or whose module is not there, stops the run as a usage error before
    pytest collects: exit 4, one line naming it (a failed item, exit 1, read as a real finding)."""
    form = pytest_each_result(beside("user"), "no function")
    assert form.returncode == pytest.ExitCode.USAGE_ERROR, form.stdout + form.stderr
    assert "--fp8-workload=fp8user_prog: expected pkg.module:function" in form.stderr, form.stderr
    missing = pytest_each_result(beside("user"), "no module")
    assert missing.returncode == pytest.ExitCode.USAGE_ERROR, missing.stdout + missing.stderr
    errors = [line for line in missing.stderr.splitlines() if line.strip()]
    assert errors == [
        "ERROR: --fp8-workload=fp8user_nowhere:step: target 'fp8user_nowhere:step': module 'fp8user_nowhere' "
        "cannot be imported (ModuleNotFoundError: No module named 'fp8user_nowhere')"
    ], missing.stderr
    assert "collected" not in missing.stdout and "Traceback" not in missing.stdout, missing.stdout


@pytest.mark.parametrize(
    "target, words",
    [
        ("fp8user_prog", "expected pkg.module:function"),
        ("fp8user_nowhere:clean", "module 'fp8user_nowhere' cannot be imported"),
        ("fp8user_prog:nothing", "has no attribute 'nothing'"),
        ("fp8user_prog:torch", "'torch' is not callable (module)"),
    ],
)
def test_a_bad_target_is_a_usage_error_naming_it(target, words, tmp_path, monkeypatch, capsys):
    (tmp_path / "fp8user_prog.py").write_text(textwrap.dedent(_USER_FILE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "fp8user_prog", raising=False)
    assert main(["trace", target]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: target {target!r}: ") and words in err[-1], err


def test_the_command_exits_1_when_nothing_was_checked(tmp_path, monkeypatch, capsys):
    """A function with no float8 op passes nothing: exit 1, saying so (as --fp8-workload fails)."""
    (tmp_path / "fp8user_prog.py").write_text(textwrap.dedent(_USER_FILE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "fp8user_prog", raising=False)
    assert main(["trace", "fp8user_prog:nofp8"]) == 1
    out = capsys.readouterr().out
    assert "fp8user_prog:nofp8: 0 FP8 op call(s), 0 violation(s)" in out and "nothing was checked" in out, out


def test_an_error_of_fp8refs_own_checks_under_the_users_call_is_a_bug_not_the_users(tmp_path, monkeypatch, capsys):
    """The tracer's own code raising a ValueError while the user's function runs (reached through
    torch's dispatch, no call of the user's) exits 3, a bug: never 2, the user's."""
    import functools

    from fp8ref.harness.trace import recorder
    from fp8ref.reference.validate import one_of

    (tmp_path / "fp8user_prog.py").write_text(textwrap.dedent(_USER_FILE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "fp8user_prog", raising=False)
    monkeypatch.setattr(
        recorder, "call_site", functools.partial(one_of, "a", ("b",), "site")
    )  # (fp8ref's frame raises)
    assert main(["trace", "fp8user_prog:clean"]) == 3
    assert "internal error in fp8ref" in capsys.readouterr().err
