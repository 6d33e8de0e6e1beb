"""Refusals vs failures (fp8ref.harness.stack.refusals): the install saying no to an input it
does not support is recorded and the profile goes on; everything else (fp8ref's own errors, a
typo, a library's assertion on an input it supports) fails with its traceback. The install's
refusals are real errors of torch (a float8 sum, a float8 type promotion), so the
classification under test is the real one."""

import dataclasses
from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.ao import profile_keys as ao_keys
from fp8ref.harness.casts import profile_keys as cast_keys
from fp8ref.harness.gemm import profile_keys as gemm_keys
from fp8ref.harness.stack import probes
from fp8ref.harness.stack.refusals import (
    DOCUMENTED_LIMITS,
    attempt,
    declined,
    describe,
    import_refusal,
    is_refusal,
    normalize,
    op_declines,
    raised_by_install,
    refusal,
)
from fp8ref.reference import codec
from fp8ref.reference.formats import get_format
from fp8ref.reference.recipes import TORCHAO_RECIPES
from tests.common.inside_install import inside


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the exception is the subject
        return exc
    raise AssertionError("expected an exception")


def _native_refusal(*args, **kwargs):
    """Stands in for an install operation that says no: torch's own words for a float8 pair it
    does not promote."""
    return torch.promote_types(torch.float8_e4m3fn, torch.float8_e5m2)


def _own_raise():
    raise RuntimeError("operation not supported (raised by a raise statement outside the install)")


@pytest.mark.parametrize(
    "call,why",
    [
        (lambda: torch.zeros(2, dtype=torch.float8_e4m3fn).sum(), "a native 'not implemented for' a float8 dtype"),
        (_native_refusal, "a native 'not supported'"),
        (lambda: torch._check_not_implemented(False, lambda: "no float8 kernel"), "torch's NotImplementedError"),
        (lambda: torch.float8_e9m9, "a dtype this torch lacks"),  # type: ignore[attr-defined]  # on purpose
        (lambda: __import__("torch.no_such_module"), "a module this install lacks"),
        (
            inside("torch", "def f():\n    assert False, 'axiswise scaling is not supported yet'\n"),
            "a declining assert",
        ),
    ],
)
def test_the_install_saying_no_is_a_refusal(call, why):
    exc = _raised(call)
    assert is_refusal(exc), why
    assert refusal(exc) == f"refused: {describe(exc)}"
    assert describe(exc).startswith(type(exc).__name__)


@pytest.mark.parametrize(
    "call,why",
    [
        (lambda: codec.encode(torch.ones(3, dtype=torch.float64), "e4m3fn"), "fp8ref's own argument check"),
        (lambda: codec.encode(torch.ones(3), "e9m9"), "fp8ref's own name check"),
        (_own_raise, "a raise statement outside the install, whatever it says"),
        (lambda: torch.ones(2).detatch(), "a typo in a check: an attribute of an object, not of the install"),  # type: ignore[attr-defined]
        (lambda: dict[str, int]()["key"], "a KeyError in the caller"),
        (lambda: 1 / 0, "arithmetic in the caller"),
        (lambda: 1 + "a", "Python's own 'unsupported operand type(s)' on the caller's line"),  # type: ignore[operator]
        (lambda: torch.ones(2) @ torch.ones(3), "a native shape check: the caller's mistake, not a missing kernel"),
        (lambda: torch._check(False, lambda: "Expected every group to be a multiple of 16"), "a torch._check"),
        (lambda: None < 3, "Python's '<' not supported between instances, on the caller's line"),  # type: ignore[operator]
        (lambda: __import__("io").BytesIO().write("abc"), "Python's 'a bytes-like object is required, not str'"),
        (lambda: __import__("fp8ref.reference.no_such_module"), "an import typo in fp8ref's own package"),
        (lambda: torch.full((2,), 1.0, dtypes=torch.float32), "a keyword typo in a call of torch"),  # type: ignore[call-overload]
        (lambda: torch.ones(2).view(), "a wrong call of a torch method"),
        (inside("torch", "def f():\n    assert False, 'scales must be positive'\n"), "a library's assertion"),
    ],
)
def test_everything_else_is_a_failure(call, why):
    exc = _raised(call)
    assert not is_refusal(exc), why
    assert refusal(exc) is None
    with pytest.raises(type(exc)):
        attempt(call)


def test_where_it_was_raised():
    # (each call on a line of its own: a native call on a raise or assert line counts as the caller's)
    float8_sum = _raised(lambda: torch.zeros(2, dtype=torch.float8_e4m3fn).sum())
    in_torch = _raised(inside("torch", "def f():\n    raise ValueError('x')\n"))
    typo = _raised(lambda: torch.ones(2).detatch())
    assert raised_by_install(float8_sum) == "native"
    assert raised_by_install(in_torch) == "torch"
    assert raised_by_install(_raised(_own_raise)) is None
    assert raised_by_install(typo) is None


@pytest.mark.parametrize("limit", DOCUMENTED_LIMITS, ids=lambda lim: f"{lim.package}-{lim.words[:30]}")
def test_each_documented_limit_says_where_it_is_documented(limit):
    assert limit.package in ("torch", "torchao", "safetensors", "transformers") and len(limit.why) > 40
    assert not issubclass(limit.kind, (AttributeError, KeyboardInterrupt)) or limit.kind is KeyError


def test_a_documented_limit_counts_only_for_its_package_and_words():
    words = "the last dimension of shape torch.Size([2, 48]) must be divisible by block_size 32"
    assert declined(AssertionError(words), "torchao") is not None
    assert declined(AssertionError(words), "transformers") is None  # another package's assert: a failure
    assert declined(AssertionError("amax must be finite"), "torchao") is None


def test_a_survey_of_torchs_own_ops_takes_what_torch_raises_but_not_fp8refs_errors():
    float8_sum = _raised(lambda: torch.zeros(2, dtype=torch.float8_e4m3fn).sum())
    asserted = _raised(inside("torch", "def f():\n    assert False, 'anything'\n"))
    typo = _raised(lambda: torch.ones(2).detatch())
    fault = _raised(inside("torch", "def f():\n    raise RuntimeError('CUDA error: misaligned address')\n"))
    assert op_declines(float8_sum) and op_declines(asserted)  # torch declining a float8 sample of its own op
    assert not op_declines(_raised(_own_raise))
    assert not op_declines(typo)
    assert not op_declines(fault)


def test_a_module_the_install_cannot_load_is_refused():
    assert import_refusal("torch.nn") is None
    assert import_refusal("torch.no_such_module").startswith("refused: ModuleNotFoundError: ")
    assert import_refusal("torch.nn", ("no_such_name",)).startswith("refused: AttributeError: ")


def test_interrupts_and_memory_errors_are_never_refusals():
    assert not is_refusal(KeyboardInterrupt())
    assert not is_refusal(MemoryError())
    assert not is_refusal(RuntimeError("not supported, but never raised"))  # no traceback: nobody refused


def test_attempt_returns_the_result_or_the_refusal():
    assert attempt(lambda: 3) == (True, 3)
    ok, text = attempt(_native_refusal)
    assert not ok and text.startswith("refused: RuntimeError: Promotion for Float8 Types is not supported")
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
    exc = _raised(_native_refusal)
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
    got = gemm_keys.scaled_mm_keys("cpu")
    # every scaling answers refused; the accumulator and scale_result probes need a working
    # tensorwise call, so they are left out rather than recorded as refusals of their own
    assert set(got) == {f"scaled_mm.{s}.{t}" for s in probes.SCALED_MM_SCALINGS for t in ("bf16", "f32")} | {
        f"f_scaled_mm.{k}.{t}" for k in ("mxfp4", "nvfp4") for t in ("bf16", "f32")
    }
    assert all(v.startswith("refused: RuntimeError: ") for k, v in got.items() if k.startswith("scaled_mm.")), got
    if probes.torchao_float8_refusal() is None:  # torchao's Float8Linear runs _scaled_mm: its keys say so too
        ao = ao_keys.torchao_keys("cpu")
        for name in TORCHAO_RECIPES:
            assert ao[f"torchao.digest.float8linear.{name}"].startswith("refused: RuntimeError"), name
            assert f"torchao.recipe.{name}.output.a" in ao  # the recipe table does not need _scaled_mm
        assert len(ao["torchao.digest.cast.tensorwise"]) == 16  # nor do the casts
    assert probes.scaled_mm_refusal("tensorwise").startswith("refused: ")


def test_a_refused_cast_takes_only_its_own_keys(monkeypatch):
    real = cast_keys.torch_cast

    def refusing_e5m2(fmt, device="cpu"):
        impl = real(fmt, device)
        return dataclasses.replace(impl, cast=_native_refusal) if get_format(fmt).name == "e5m2" else impl

    monkeypatch.setattr(cast_keys, "torch_cast", refusing_e5m2)
    got = cast_keys.cast_keys("cpu")
    e5m2 = {k: v for k, v in got.items() if k.startswith("cast.e5m2.")}
    assert len(e5m2) == 9 and all(str(v).startswith("refused: RuntimeError") for v in e5m2.values()), e5m2  # 2x4 + f64
    assert got["cast.e4m3fn.bf16.in_range_mismatches"] == 0  # every other format still checked
    special = cast_keys.special_cast_keys("cpu")
    assert special["cast.e5m2.f32.neg_zero"].startswith("refused: ") and special["cast.e4m3fn.f32.neg_zero"] == "0x80"


def test_a_bug_in_fp8ref_still_surfaces_from_the_profile(monkeypatch):
    # all 16-bit inputs as float64: the codec's own argument check raises, which is a bug, not a refusal
    monkeypatch.setattr(cast_keys, "all_16bit_inputs", lambda dtype: torch.zeros(8, dtype=torch.float64))
    with pytest.raises(TypeError, match="expected dtype in"):
        cast_keys.cast_keys("cpu")


def test_a_torchao_that_does_not_import_is_recorded(monkeypatch):
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "refused: ImportError: cannot import name 'X'")
    assert ao_keys.torchao_keys("cpu") == {"torchao": "refused: ImportError: cannot import name 'X'"}
    monkeypatch.setattr(probes, "torchao_float8_refusal", lambda: "missing: torchao is not installed")
    assert ao_keys.torchao_keys("cpu") == {"torchao": "missing"}


def test_skip_helper_names_the_versions_and_the_refusal(skip_if_refused):
    skip_if_refused(None, "anything")  # a capability the install has: no skip
    with pytest.raises(pytest.skip.Exception) as info:
        skip_if_refused("refused: RuntimeError: no rowwise here", "rowwise torch._scaled_mm on cpu")
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

    assert is_refusal(_raised(lambda: torch._check(False, lambda: "an ordinary refusal: not supported")))
    assert not is_refusal(_raised(inside_torch))
    with pytest.raises(RuntimeError, match=message.split(": ")[1]):
        attempt(inside_torch)


def test_a_device_fault_propagates_from_the_probes(monkeypatch, fresh_install_answers):
    monkeypatch.setattr(torch, "_scaled_mm", _device_fault)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        probes.scaled_mm_refusal("tensorwise")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        gemm_keys.scaled_mm_keys("cpu")
