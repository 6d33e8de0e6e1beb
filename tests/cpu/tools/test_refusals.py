"""Refusals vs bugs: an install that refuses an operation is recorded and the profile goes on; an
error raised by fp8ref itself still surfaces. The install's refusals are simulated with real
native errors (a matmul of mismatched shapes), so the classification under test is the real one."""

import dataclasses
from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.profiles import profile
from fp8ref.harness.stack import probes
from fp8ref.harness.stack.refusals import attempt, describe, is_refusal, normalize, refusal
from fp8ref.reference import codec
from fp8ref.reference.formats import get_format
from fp8ref.reference.recipes import TORCHAO_RECIPES


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the exception is the subject
        return exc
    raise AssertionError("expected an exception")


def _native_refusal(*args, **kwargs):
    """Stands in for an install operation that says no: torch's own shape check fires."""
    return torch.ones(2) @ torch.ones(3)


def _own_raise():
    raise RuntimeError("raised by a raise statement outside the install")


@pytest.mark.parametrize(
    "call,why",
    [
        (lambda: torch.ones(2) @ torch.ones(3), "a native torch check, called from here"),
        (lambda: torch.nn.Linear(2, 3)(torch.ones(4)), "raised inside torch's Python code"),
        (lambda: torch.finfo(torch.int32), "a TypeError from a native function"),
        (lambda: torch.float8_e9m9, "a dtype this torch lacks"),  # type: ignore[attr-defined]  # on purpose
    ],
)
def test_errors_raised_by_the_install_are_refusals(call, why):
    exc = _raised(call)
    assert is_refusal(exc), why
    assert refusal(exc) == f"refused: {describe(exc)}"
    assert describe(exc).startswith(type(exc).__name__ + ":")


@pytest.mark.parametrize(
    "call,why",
    [
        (lambda: codec.encode(torch.ones(3, dtype=torch.float64), "e4m3fn"), "fp8ref's own argument check"),
        (lambda: codec.encode(torch.ones(3), "e9m9"), "fp8ref's own name check"),
        (_own_raise, "a raise statement outside the install"),
        (lambda: dict[str, int]()["key"], "a KeyError, which no native torch function raises for a refusal"),
        (lambda: 1 / 0, "arithmetic in the caller"),
    ],
)
def test_errors_raised_by_fp8ref_or_the_caller_are_bugs(call, why):
    exc = _raised(call)
    assert not is_refusal(exc), why
    assert refusal(exc) is None
    with pytest.raises(type(exc)):
        attempt(call)


def test_interrupts_and_memory_errors_are_never_refusals():
    assert not is_refusal(KeyboardInterrupt())
    assert not is_refusal(MemoryError())
    assert not is_refusal(RuntimeError("never raised"))  # no traceback: nobody refused anything


def test_attempt_returns_the_result_or_the_refusal():
    assert attempt(lambda: 3) == (True, 3)
    ok, text = attempt(lambda: torch.ones(2) @ torch.ones(3))
    assert not ok and text.startswith("refused: RuntimeError: ")
    with pytest.raises(TypeError, match="fn: expected a callable"):
        attempt(3)


def test_messages_lose_what_varies_between_builds():
    """torch 2.9.1 and 2.10.0 refuse rowwise CPU _scaled_mm with the same words at another line of
    Linear.cpp: the profile must not call that a behaviour change."""
    a, b = (
        RuntimeError(
            f'(scale_a.numel() == 1) INTERNAL ASSERT FAILED at "/pytorch/aten/src/x.cpp":{n}, please '
            "report a bug to PyTorch. Only per-tensor scaling here.\nException raised from ..."
        )
        for n in (512, 516)
    )
    assert describe(a) == describe(b) == "RuntimeError: (scale_a.numel() == 1) failed: Only per-tensor scaling here."
    err = ImportError("cannot import name 'ScalingType' from 'torch.nn.functional' (/venv/torch/nn/functional.py)")
    assert describe(err) == "ImportError: cannot import name 'ScalingType' from 'torch.nn.functional'"
    assert normalize("x" * 300).endswith("...") and len(normalize("x" * 300)) == 240


def test_describe_keeps_one_short_line():
    exc = _raised(lambda: torch.ones(2) @ torch.ones(3))
    text = describe(exc)
    assert "\n" not in text and len(text) <= 260
    assert describe(_raised(lambda: (_ for _ in ()).throw(RuntimeError("a\nb")))) == "RuntimeError: a"


@pytest.fixture
def fresh_install_answers():
    """install's answers are cached per process; a test that changes the install clears them."""

    def clear():
        for fn in (
            probes.scaled_mm_refusal,
            probes.fp4_scaled_mm_refusal,
            probes.torchao_float8_refusal,
            probes.torchao_recipe_refusal,
            probes.torch_dtype_refusal,
        ):
            fn.cache_clear()

    clear()
    yield
    clear()


def test_a_refused_scaled_mm_is_recorded_and_the_profile_goes_on(monkeypatch, fresh_install_answers):
    monkeypatch.setattr(torch, "_scaled_mm", _native_refusal)
    got = profile._probe_scaled_mm("cpu")
    # every scaling answers refused; the accumulator and scale_result probes need a working
    # tensorwise call, so they are left out rather than recorded as refusals of their own
    assert set(got) == {f"scaled_mm.{s}.{t}" for s in probes.SCALED_MM_SCALINGS for t in ("bf16", "f32")} | {
        f"f_scaled_mm.{k}.{t}" for k in ("mxfp4", "nvfp4") for t in ("bf16", "f32")
    }
    assert all(v.startswith("refused: RuntimeError: ") for k, v in got.items() if k.startswith("scaled_mm.")), got
    if probes.torchao_float8_refusal() is None:  # torchao's Float8Linear runs _scaled_mm: its keys say so too
        ao = profile._probe_torchao("cpu")
        for name in TORCHAO_RECIPES:
            assert ao[f"torchao.digest.float8linear.{name}"].startswith("refused: RuntimeError"), name
            assert f"torchao.recipe.{name}.output.a" in ao  # the recipe table does not need _scaled_mm
        assert len(ao["torchao.digest.cast.tensorwise"]) == 16  # nor do the casts
    assert probes.scaled_mm_refusal("tensorwise").startswith("refused: ")


def test_a_refused_cast_takes_only_its_own_keys(monkeypatch):
    real = profile.torch_cast

    def refusing_e5m2(fmt, device="cpu"):
        impl = real(fmt, device)
        return dataclasses.replace(impl, cast=_native_refusal) if get_format(fmt).name == "e5m2" else impl

    monkeypatch.setattr(profile, "torch_cast", refusing_e5m2)
    got = profile._probe_casts("cpu")
    e5m2 = {k: v for k, v in got.items() if k.startswith("cast.e5m2.")}
    assert len(e5m2) == 9 and all(str(v).startswith("refused: RuntimeError") for v in e5m2.values()), e5m2  # 2x4 + f64
    assert got["cast.e4m3fn.bf16.in_range_mismatches"] == 0  # every other format still checked
    special = profile._probe_special_casts("cpu")
    assert special["cast.e5m2.f32.neg_zero"].startswith("refused: ") and special["cast.e4m3fn.f32.neg_zero"] == "0x80"


def test_a_bug_in_fp8ref_still_surfaces_from_the_profile(monkeypatch):
    # all 16-bit inputs as float64: the codec's own argument check raises, which is a bug, not a refusal
    monkeypatch.setattr(profile, "all_16bit_inputs", lambda dtype: torch.zeros(8, dtype=torch.float64))
    with pytest.raises(TypeError, match="expected dtype in"):
        profile._probe_casts("cpu")


def test_a_torchao_that_does_not_import_is_recorded(monkeypatch):
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    assert profile._probe_torchao("cpu") == {"torchao": "refused: ImportError: cannot import name 'X'"}
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "missing: torchao is not installed")
    assert profile._probe_torchao("cpu") == {"torchao": "missing"}


def test_skip_helper_names_the_versions_and_the_refusal(skip_unless):
    skip_unless(None, "anything")  # a capability the install has: no skip
    with pytest.raises(pytest.skip.Exception) as info:
        skip_unless("refused: RuntimeError: no rowwise here", "rowwise torch._scaled_mm on cpu")
    msg = str(info.value)
    assert f"torch {torch.__version__}" in msg and "torchao" in msg
    assert "rowwise torch._scaled_mm on cpu" in msg and "refused: RuntimeError: no rowwise here" in msg


def _device_fault(*args, **kwargs):
    """Stands in for a kernel that broke the CUDA context: a RuntimeError raised inside torch (a
    refusal by every other rule), with the CUDA runtime's words."""
    torch._check(False, lambda: "CUDA error: an illegal memory access was encountered")


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: an illegal memory access was encountered",
        "CUDA error: misaligned address",
        "CUDA error: unspecified launch failure",
        "CUDA error: device-side assert triggered",
    ],
)
def test_a_device_fault_is_a_failure_not_a_refusal(message):
    """A fault that breaks the CUDA context must fail, or every probe after it reads 'refused'
    and every later test skips: a crashed GPU run would look green."""

    def inside_torch():  # raised inside torch, so a refusal by every other rule
        torch._check(False, lambda: message)

    assert is_refusal(_raised(lambda: torch._check(False, lambda: "an ordinary refusal")))
    assert not is_refusal(_raised(inside_torch))
    with pytest.raises(RuntimeError, match=message.split(": ")[1]):
        attempt(inside_torch)


def test_a_device_fault_propagates_from_the_probes(monkeypatch, fresh_install_answers):
    monkeypatch.setattr(torch, "_scaled_mm", _device_fault)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        probes.scaled_mm_refusal("tensorwise")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        profile._probe_scaled_mm("cpu")
