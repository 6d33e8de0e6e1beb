"""fp8ref's own malformed calls must fail, never read as the install's refusal (issue 52, item 1).

A refusal is the install declining a well-formed call (fp8ref/harness/stack/refusals.py). Each
case here is a call fp8ref could get wrong: a value of another dtype than the destination's, a
``_scaled_mm`` scale of the wrong size, dtype or rank, operands whose shapes do not multiply, a
view of the wrong size, a checkpoint twin with a zero scale. Each must raise out of ``attempt``
and ``survey`` (or, for the twin, leave torchao nothing to refuse): were it a refusal, the probe
would pin the install as refusing what it was never asked properly."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fp8ref.harness.stack.refusals import attempt, is_refusal, op_declines, survey

E4M3 = torch.float8_e4m3fn


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is under test
        return exc
    raise AssertionError("expected the call to raise")


# --- a value of another dtype than the destination's ----------------------------------------------
def _index_put_float32_into_float64() -> torch.Tensor:
    t = torch.zeros(4, dtype=torch.float64)
    return t.index_put_((torch.arange(4),), torch.ones(4, dtype=torch.float32))


def test_a_float32_value_into_a_float64_index_put_is_no_refusal():
    with pytest.raises(RuntimeError, match="dtypes match"):
        attempt(_index_put_float32_into_float64)
    assert not is_refusal(_raised(_index_put_float32_into_float64))


def test_a_float32_value_into_a_float64_index_put_is_no_decline_of_a_survey():
    with pytest.raises(RuntimeError, match="dtypes match"):
        survey(_index_put_float32_into_float64)


# --- _scaled_mm scales of a shape or dtype its meta registration does not take -----------------------
def _operands() -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.ones(32, 64).to(E4M3)
    b = torch.ones(48, 64).to(E4M3).t()  # (K, N) column-major, as the backends document
    return a, b


MALFORMED_SCALES = {
    "rowwise scale_a of 31 rows for 32": (torch.ones(31, 1), torch.ones(1, 48)),
    "float64 tensorwise scales": (torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)),
    "1-D rowwise scales": (torch.ones(32), torch.ones(48)),
}


def _documented(case: str, a: torch.Tensor, b: torch.Tensor, kwargs: dict) -> None:
    """Skip, naming the torch, where its meta registration of ``_scaled_mm`` does not document what
    ``case`` gets wrong: nothing there tells the malformed call apart (torch 2.9.1's CPU kernel
    answers any scale that is not a singleton with its refusal of the recipe, before any shape)."""
    from fp8ref.harness.stack.refusals import malformed

    if malformed("torch._scaled_mm", (a, b), kwargs) is None:
        pytest.skip(
            f"torch {torch.__version__}: its _scaled_mm meta registration takes {case}, so no documented "
            "shape tells this malformed call from a well-formed one"
        )


@pytest.mark.parametrize("case", MALFORMED_SCALES)
def test_a_malformed_scale_of_scaled_mm_is_no_refusal(case):
    a, b = _operands()
    sa, sb = MALFORMED_SCALES[case]
    _documented(case, a, b, {"scale_a": sa, "scale_b": sb, "out_dtype": torch.float32})

    def mm() -> torch.Tensor:
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)

    with pytest.raises((RuntimeError, ValueError)):
        attempt(mm)


@pytest.mark.parametrize("case", MALFORMED_SCALES)
def test_a_malformed_scale_called_as_probes_call_it_is_no_refusal(case):
    from fp8ref.harness.stack.refusals import call, malformed

    a, b = _operands()
    sa, sb = MALFORMED_SCALES[case]
    kwargs = {"scale_a": sa, "scale_b": sb, "out_dtype": torch.float32}
    _documented(case, a, b, kwargs)
    assert malformed("torch._scaled_mm", (a, b), kwargs) is not None  # torch's meta registration says no
    with pytest.raises((RuntimeError, ValueError)):
        attempt(lambda: call("torch._scaled_mm", a, b, **kwargs))


def test_the_documented_scaled_mm_limit_still_matches_the_call_it_documents():
    """A well-formed blockwise call (the shapes the meta registration lists) that the CPU kernel
    answers 'Invalid scaling configuration' is still the install's refusal, through ``call``;
    the same words from a plain call are not (they carry no call to check)."""
    from fp8ref.harness.stack.refusals import call, malformed

    m, k, n = 128, 256, 128
    a = torch.ones(m, k).to(E4M3)
    b = torch.ones(n, k).to(E4M3).t()
    kwargs = {
        "scale_a": torch.ones(k // 128, m).t(),
        "scale_b": torch.ones(n // 128, k // 128).t(),
        "out_dtype": torch.bfloat16,
    }
    assert malformed("torch._scaled_mm", (a, b), kwargs) is None
    ok, got = attempt(lambda: call("torch._scaled_mm", a, b, **kwargs))
    if ok:  # (an install whose CPU kernel runs blockwise: nothing refused, nothing to tell apart)
        return
    assert str(got).startswith("refused: ")
    plain = _raised(lambda: torch._scaled_mm(a, b, **kwargs))
    if str(plain).startswith("Invalid scaling configuration"):  # (the limit's words; 2.9.1 answers in others)
        assert not is_refusal(plain)
    # the same call built by the install's own code (as torchao's NVFP4 linear calls _scaled_mm): its
    # answer (a stand-in in torch's folder, which every install has)
    from tests.common.inside_install import inside

    by_the_install = inside("torch", "def f(a, b, kw):\n    return torch._scaled_mm(a, b, **kw)\n")
    assert is_refusal(_raised(lambda: by_the_install(a, b, kwargs)))


# --- shapes that do not multiply, a view of the wrong size -------------------------------------------
def _matmul_shape_mismatch() -> torch.Tensor:
    return torch.ones(3, 4) @ torch.ones(5, 6)


def _bad_view() -> torch.Tensor:
    return torch.zeros(12, dtype=torch.uint8).view(E4M3).view(5)


@pytest.mark.parametrize("fn", [_matmul_shape_mismatch, _bad_view], ids=["matmul shapes", "view size"])
def test_a_shape_or_view_mistake_is_no_decline_of_a_survey(fn):
    assert not op_declines(_raised(fn))
    with pytest.raises(RuntimeError):
        survey(fn)


# --- a checkpoint twin with a zero scale ------------------------------------------------------------
@pytest.mark.needs("torchao")
def test_the_twin_a_checkpoint_loads_into_keeps_a_valid_scale():
    """torchao's Float8TrainingTensor copy_ takes a source of equal scale only: a twin with a
    zeroed scale makes 'copy_' and 'load_state_dict' read refused by fp8ref's own setup."""
    from fp8ref.harness.state.keeping import _zeroed_twin, check_kept, subclass_examples

    t = subclass_examples()["float8_tensorwise"]()
    twin = _zeroed_twin(t)
    # (torchao's equal-scale rule for this type: its twin keeps the scale; the others' differ, below)
    assert torch.equal(twin._scale, t._scale) and bool((twin._scale != 0).all())
    assert bool((twin._data.view(torch.uint8) == 0).all())  # the codes zeroed: the copy must write them
    r = check_kept(t)
    assert "copy_" not in r.refused and "load_state_dict" not in r.refused, r.refused
    assert not r.problems, r.problems


# --- the probe built as a user writes it: a float8 value into a float8 destination -----------------
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_index_put_into_float8_is_written_and_checked_not_refused(fmt):
    """check_written's index_put_ passed a float32 value into a float8 tensor, which torch rejects
    as a dtype mismatch: the path read 'refused' and the write was never checked."""
    from fp8ref.harness.native.native_checks import check_written
    from fp8ref.reference.formats import get_format

    answer = check_written(get_format(fmt))["index_put_"]
    assert answer.startswith("as .to") or answer.startswith("differs: "), answer


@pytest.mark.needs("torchao")
@pytest.mark.parametrize("kind", ["mx_e4m3", "nvfp4_two_level"])
def test_a_way_that_keeps_the_codes_and_drops_the_scales_is_caught(kind):
    """The twin a checkpoint loads into holds valid scales other than the source's: an in-place
    loader that copies the element codes and not the scales leaves them so, and is named."""
    from fp8ref.harness.state.keeping import _zeroed_twin, check_kept, subclass_examples

    t = subclass_examples()[kind]()
    names, _ = t.__tensor_flatten__()
    twin = _zeroed_twin(t)
    for n in names:
        if "scale" in n:
            got, want = getattr(twin, n), getattr(t, n)
            assert got.dtype == want.dtype and not bool((got.float() == want.float()).any()), n
            assert bool(torch.isfinite(got.float()).all()), n  # (valid: no NaN code)

    def drops_scales(src):
        out = _zeroed_twin(src)
        for n in names:
            if "scale" not in n:
                getattr(out, n).copy_(getattr(src, n))
        return out

    lost = check_kept(t, {"codes only": drops_scales}).lost
    assert "codes only" in lost and any("scale" in str(d) for d in lost["codes only"]), lost
