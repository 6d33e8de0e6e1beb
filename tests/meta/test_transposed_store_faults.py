"""Stand-ins for a miscompiled transposed FP8 store, each wrong under one configuration only, and
what ``transposed_stores.check_transposed_store`` (tests/gpu/test_transposed_stores.py) says:
it fails naming the configuration, the program, the shape and the first differing byte.

- On the CPU: inductor's real compile, with the run of one option (``cpp.simdlen=1``) patched to
  write two wrong bytes into the tail of its transposed store.
- On a stand-in autotuner (the CUDA path, run here without a GPU): a kernel with six launch
  configurations whose fourth writes wrong bytes and never wins the benchmark. Checking what the
  autotuner picks (the ``max-autotune`` run) passes; forcing each candidate
  (``compiled_variants.forced_candidates``) catches it, naming the candidate. A sweep with
  nothing to sweep (no autotuned kernel, or one configuration each) is an error.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from fp8ref.harness.casts import compiled_variants as cv
from fp8ref.harness.casts import transposed_stores as ts
from fp8ref.reference.formats import E4M3FN

SHAPE = (33, 130)
# static_t's output is x's transpose, (130, 33), contiguous: its rows 128 and 129 are the ones
# past the CPU's last whole 32x32 tile; column 32 is past the last whole tile the other way
BAD = ((128, 32), (129, 32))
FIRST_BYTE = 128 * 33 + 32


def _corrupt(out: torch.Tensor) -> torch.Tensor:
    codes = out.view(torch.uint8)
    for idx in BAD:
        codes[idx] ^= 0x5A
    return out


def test_a_store_wrong_under_one_cpu_option_fails_naming_it(monkeypatch, fresh_dynamo):
    real = cv.compile_variant
    target = "cpp.simdlen=1 (scalar loops)"

    def compile_variant(fn: Any, variant: cv.Variant) -> Any:
        compiled = real(fn, variant)
        if variant.label != target:
            return compiled
        return lambda *args: _corrupt(compiled(*args))

    monkeypatch.setattr(cv, "compile_variant", compile_variant)
    problem = ts.check_transposed_store("static_t", SHAPE, "cpu")
    assert problem is not None, "a transposed store wrong under one option passed"
    lines = problem.splitlines()
    assert len(lines) == 1, f"only {target!r} is wrong, got:\n{problem}"
    assert lines[0].startswith(f"compiled {target}: static_t on (33, 130) (cpu"), problem
    assert f"differs from eager in 2 of {SHAPE[0] * SHAPE[1]} elements" in problem, problem
    assert f"first differing byte {FIRST_BYTE} (element [128, 32])" in problem, problem


def test_without_the_fault_every_cpu_option_passes(fresh_dynamo):
    """The control: the same check on the same program, nothing patched."""
    assert ts.check_transposed_store("static_t", SHAPE, "cpu") is None


# --- the CUDA path, on a stand-in autotuner -------------------------------------------------

CONFIGS = [(32, 32), (64, 64), (256, 16), (16, 256), (256, 1), (1, 256)]  # inductor's 2-D list
WRONG = 3  # (16, 256): never the fastest here, so never picked


class FakeAutotuner:
    """What inductor's ``CachingAutotuner`` is to the sweep: ``launchers`` (one per candidate,
    each with its ``config``), and a ``run`` that benchmarks them on the first call and keeps the
    winner (here always the first)."""

    def __init__(self, program: ts.Program) -> None:
        self.inductor_meta = {"kernel_name": "triton_poi_fused_t_0"}
        self.launchers = [self._launcher(program, i) for i in range(len(CONFIGS))]

    @staticmethod
    def _launcher(program: ts.Program, i: int) -> Any:
        x, y = CONFIGS[i]
        config = types.SimpleNamespace(kwargs={"XBLOCK": x, "YBLOCK": y}, num_warps=4, num_stages=1)

        fn = program.make()

        def launch(*args: Any, stream: Any = None) -> Any:
            out = fn(*args)
            return _corrupt(out) if i == WRONG else out

        return types.SimpleNamespace(config=config, __call__=launch, launch=launch)

    def precompile(self) -> None:
        raise AssertionError("the launchers exist from the start")

    def run(self, *args: Any, stream: Any) -> Any:
        if len(self.launchers) > 1:
            self.launchers = self.launchers[:1]  # the benchmark's winner
        return self.launchers[0].launch(*args, stream=stream)


def _as_if_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    program = ts.PROGRAMS["static_t"]
    cuda = {v.label: v for v in cv.variants("cuda")}
    monkeypatch.setattr(cv, "variants", lambda device: (cuda["max-autotune"], cuda["max-autotune, each candidate"]))
    # each compile builds its kernels anew, as inductor's generated module does
    monkeypatch.setattr(
        cv, "compile_variant", lambda fn, variant: (lambda k: lambda *a: k.run(*a, stream=None))(FakeAutotuner(program))
    )
    monkeypatch.setattr(cv, "_autotuner_class", lambda: FakeAutotuner)


def test_a_store_wrong_under_one_launch_configuration_fails_naming_it(monkeypatch):
    _as_if_cuda(monkeypatch)
    original_run = FakeAutotuner.run
    problem = ts.check_transposed_store("static_t", SHAPE, "cpu")
    assert FakeAutotuner.run is original_run, "the sweep left the autotuner's run patched"
    assert problem is not None, "a launch configuration that writes wrong bytes passed"
    lines = problem.splitlines()
    assert len(lines) == 1, f"only candidate {WRONG + 1} is wrong, got:\n{problem}"
    assert lines[0].startswith(
        f"compiled max-autotune, each candidate: triton_poi_fused_t_0: candidate {WRONG + 1} of {len(CONFIGS)} "
        "(XBLOCK: 16, YBLOCK: 256, num_warps: 4, num_stages: 1): static_t on (33, 130)"
    ), problem
    assert f"first differing byte {FIRST_BYTE} (element [128, 32])" in problem, problem


def test_checking_only_the_winner_misses_it(monkeypatch):
    """Why the sweep: the configuration that writes wrong bytes never wins, so the compiled run a
    user gets (and a check of it alone) is clean."""
    _as_if_cuda(monkeypatch)
    assert ts.check_transposed_store("static_t", SHAPE, "cpu", only=("max-autotune",)) is None


def test_an_eager_cast_off_the_codec_is_named_as_the_install_s():
    """When eager itself is wrong the compiled stores are not compared with it: the line says it
    is the install's cast."""

    def truncating(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        out = ts.PROGRAMS["static_t"].make()(x, s)
        codes = out.view(torch.uint8)
        codes[0, 0] ^= 0x01
        return out

    bad = ts.Program("off_by_one", E4M3FN, lambda: truncating, ts.PROGRAMS["static_t"].reference)
    problem = ts.check_transposed_store(bad, SHAPE, "cpu")
    assert problem is not None and problem.startswith("eager off_by_one on (33, 130)"), problem
    assert "not the codec's" in problem, problem


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"program": "nope"}, "program: expected one of"),
        ({"device": "tpu"}, "device: expected 'cpu' or 'cuda'"),
        ({"shape": (0, 4)}, "shape: expected two positive sizes"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs, words):
    args = {"program": "static_t", "shape": SHAPE, "device": "cpu"} | kwargs
    with pytest.raises(ValueError, match=words):
        ts.check_transposed_store(args["program"], args["shape"], args["device"])


def test_a_sweep_that_forces_no_kernel_is_an_error(monkeypatch):
    """A program compiled to no autotuned kernel leaves nothing to sweep: that is said, not
    passed as every configuration checked."""
    _as_if_cuda(monkeypatch)
    monkeypatch.setattr(cv, "compile_variant", lambda fn, variant: fn)  # runs no kernel at all
    with pytest.raises(RuntimeError, match="launched no autotuned kernel .FakeAutotuner.run was never called"):
        ts.check_transposed_store("static_t", SHAPE, "cpu")


def test_a_sweep_with_one_configuration_per_kernel_is_an_error(monkeypatch):
    """A torch whose max-autotune lists one configuration per kernel leaves nothing to sweep:
    that is said too (the sweep would otherwise pass having chosen nothing)."""
    _as_if_cuda(monkeypatch)
    real_init = FakeAutotuner.__init__

    def one_launcher(self: FakeAutotuner, program: ts.Program) -> None:
        real_init(self, program)
        self.launchers = self.launchers[:1]

    monkeypatch.setattr(FakeAutotuner, "__init__", one_launcher)
    with pytest.raises(
        RuntimeError, match="each kernel had one launch configuration .triton_poi_fused_t_0: candidate 1 of 1"
    ):
        ts.check_transposed_store("static_t", SHAPE, "cpu")
