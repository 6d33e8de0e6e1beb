"""fp8ref's own needs (numpy, hypothesis, expecttest, gfloat, ml_dtypes: what fp8ref judges with)
are never the install's answers: a probe that meets one missing records "not measured here",
which is not compared, is said in the run's account, and keeps a golden from being pinned; a
digest is the same without numpy. And the accepted differences of a team are keyed on the stack
under test, not on these packages. (The whole profile with each hidden: tests/meta/test_own_needs_hidden.py.)"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from fp8ref.harness.profiles.golden import compare_with_golden, golden_path
from fp8ref.harness.profiles.profile_file import diff, install_label, load, not_compared, save
from fp8ref.harness.profiles.stack_identity import label_matches, unusable
from fp8ref.harness.stack import install, probing, refusals
from fp8ref.harness.stack.refusals import (
    NOT_MEASURED,
    OWN_NEEDS,
    attempt,
    import_refusal,
    is_refusal,
    not_measured,
    observe,
    own_need,
)
from tests.common.hidden_packages import hide
from tests.common.paths import GOLDEN


@pytest.fixture
def golden():
    return load(GOLDEN / "cpu.json")


def _missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named '{name}'", name=name)


@pytest.fixture
def absent(monkeypatch):
    """``absent(*names)``: those of fp8ref's own needs read as not installed here."""

    def mark(*names: str) -> None:
        monkeypatch.setattr(refusals, "_not_installed", lambda name: name in names)

    return mark


@pytest.mark.parametrize("package", OWN_NEEDS)
def test_a_missing_own_need_is_not_measured_never_refused(package, absent):
    absent(package)

    def probe():
        raise _missing(package)

    assert own_need(_missing(package)) == package and not is_refusal(_missing(package))
    assert attempt(probe) == (False, not_measured(package))
    ok, value = observe(probe)
    assert not ok and value.startswith(NOT_MEASURED) and package in value and "fp8ref[test]" in value


def test_an_installed_package_that_breaks_is_no_missing_need(monkeypatch):
    monkeypatch.setattr(refusals, "_not_installed", lambda name: False)
    # numpy installed: a numpy of another ABI, or a name it lacks, is judged as any error
    assert own_need(RuntimeError("Numpy is not available")) is None
    assert own_need(_missing("numpy")) is None
    assert own_need(ImportError("cannot import name 'X' from 'numpy'", name="numpy")) is None


def test_torchs_numpy_words_and_a_chained_import_error_are_an_own_need(absent):
    absent("numpy")
    assert own_need(RuntimeError("Numpy is not available")) == "numpy"
    # an error raised while handling a missing numpy, not from it, is judged as itself
    try:
        try:
            raise _missing("numpy")
        except ImportError:
            raise NotImplementedError("not supported for this dtype") from None
    except NotImplementedError as exc:
        assert own_need(exc) is None
    try:
        try:
            raise _missing("numpy.core")
        except ImportError as inner:
            raise RuntimeError("could not build the oracle") from inner
    except RuntimeError as outer:
        assert own_need(outer) == "numpy"
    # the stack's own packages stay the install's answers
    assert own_need(_missing("torchao")) is None and own_need(_missing("transformers.integrations")) is None
    with pytest.raises(ValueError, match="package: expected one of fp8ref's own needs"):
        not_measured("torchao")


def test_a_module_that_imports_a_hidden_own_need_is_not_measured(tmp_path, monkeypatch):
    (tmp_path / "needs_gfloat_stand_in.py").write_text("import gfloat\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = list(__import__("sys").meta_path)
    try:
        hide(["gfloat"])
        assert import_refusal("needs_gfloat_stand_in") == not_measured("gfloat")
    finally:
        __import__("sys").meta_path[:] = saved


def test_a_digest_is_the_same_without_numpy(monkeypatch):
    t = torch.arange(-300, 300, dtype=torch.float32).reshape(20, 30).t().to(torch.bfloat16)
    with_numpy = probing.digest(t, t[3])

    def no_numpy(self):
        raise RuntimeError("Numpy is not available")

    monkeypatch.setattr(torch.Tensor, "numpy", no_numpy)
    assert probing.digest(t, t[3]) == with_numpy
    assert probing.tensor_bytes(t) == bytes(t.contiguous().view(torch.uint8).reshape(-1).tolist())


def _unmeasured(golden: dict) -> dict:
    """``golden`` as collected without numpy: a gate key not measured and its family's keys absent."""
    now = copy.deepcopy(golden)
    why = not_measured("numpy")
    for key in [k for k in now["behaviour"] if k.startswith("checkpoint.torchao.")]:
        del now["behaviour"][key]
    now["behaviour"]["checkpoint.torchao"] = why
    now["behaviour"]["torchao.digest.cast.rowwise"] = why
    return now


def test_keys_not_measured_are_not_compared_and_say_why(golden):
    now = _unmeasured(golden)
    assert diff(golden, now) == []
    left_out = not_compared(golden, now)
    assert list(left_out) == [f"{not_measured('numpy')} in B"]
    assert "torchao.digest.cast.rowwise" in left_out[f"{not_measured('numpy')} in B"]
    # a key of that family still present on both sides is compared as ever
    now["behaviour"]["checkpoint.deviation.e4m3fn"] = "changed"
    assert [k for k, _, _ in diff(golden, now)] == ["checkpoint.deviation.e4m3fn"]


def test_a_golden_is_not_pinned_with_keys_not_measured(golden, tmp_path):
    target = tmp_path / "ci" / "stack.json"
    target.parent.mkdir()
    status, lines = compare_with_golden(target, update=True, now=_unmeasured(golden))
    assert status == "not measured" and not target.exists()
    assert lines[0].startswith("2 keys not measured here: fp8ref needs numpy") and "not pinned" in lines[-1]


def test_a_package_that_does_not_import_leaves_its_and_its_importers_keys_uncompared(golden):
    now = copy.deepcopy(golden)
    now["versions"]["torchao"] = "0.18.0 installed, does not import: RuntimeError: built for another torch"
    now["behaviour"]["torchao.digest.cast.rowwise"] = "refused: RuntimeError: built for another torch"
    now["behaviour"]["transformers.fp8.from_pretrained.float"] = "refused: RuntimeError: built for another torch"
    assert set(unusable(now)) == {"torchao", "transformers", "accelerate"}
    assert diff(golden, now) == []
    whys = list(not_compared(golden, now))
    assert any(w.startswith("torchao unusable: 0.18.0 installed, does not import") for w in whys), whys
    assert any(w.startswith("transformers unusable: imports torchao") for w in whys), whys
    # an absent torchao is no reason to leave transformers' keys out: transformers does not try it
    absent = copy.deepcopy(golden)
    absent["versions"]["torchao"] = None
    assert "transformers" not in unusable(absent)


def test_accepted_differences_are_keyed_on_the_stack_under_test(golden, tmp_path):
    label = install_label(golden)
    assert "ml_dtypes" not in label and "gfloat" not in label and "expecttest" not in label
    assert label.startswith("torch 2.13.0, torchao 0.18.0, transformers 5.24.0") and label.endswith("device cpu")
    pinned = golden_path(tmp_path / "stack.json")
    save(golden, pinned)
    now = copy.deepcopy(golden)
    now["behaviour"]["cast.e4m3fn.bf16.overflow"] = "nonsaturate"
    accepted = {label: {"differences": {"cast.e4m3fn.bf16.overflow": "nonsaturate"}, "why": "measured"}}
    (tmp_path / "stack-installs.json").write_text(json.dumps(accepted))
    # fp8ref's test extras installed or upgraded into the same stack: still accepted
    now["versions"].update(ml_dtypes="0.7.0", gfloat="0.6.0", expecttest=None)
    assert compare_with_golden(pinned, now=now)[0] == "named"
    # an older label that named them matches too; a changed package of the stack does not
    old = "torch 2.13.0, torchao 0.18.0, transformers 5.24.0, ml_dtypes 0.6.0, gfloat 0.5.2"
    assert label_matches(old, now)
    now["versions"]["transformers"] = "5.25.0"
    assert not label_matches(label, now) and compare_with_golden(pinned, now=now)[0] == "differs"


def test_a_key_absent_under_a_gate_not_measured_is_not_compared_and_no_other_is_excused(golden):
    now = copy.deepcopy(golden)
    why = not_measured("numpy")
    for key in [k for k in now["behaviour"] if k.startswith("native.")]:
        del now["behaviour"][key]
    now["behaviour"]["native"] = why  # (the op catalogue could not be imported: one key for the family)
    now["behaviour"]["torchao.surface"] = why
    assert diff(golden, now) == []
    # a key removed where no key above it says it was not measured is a difference as ever
    del now["behaviour"]["workload.torchao.qat"]
    assert [k for k, _, _ in diff(golden, now)] == ["workload.torchao.qat"]


def test_a_pinned_package_that_does_not_import_says_so_in_the_versions(tmp_path, monkeypatch):
    (tmp_path / "gfloat").mkdir()
    (tmp_path / "gfloat" / "__init__.py").write_text("raise RuntimeError('built for another numpy')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "gfloat", raising=False)
    monkeypatch.setattr(install, "installed_version", lambda dist: "0.5.2" if dist == "gfloat" else None)
    install.import_failure.cache_clear()
    try:
        got = install.pinned_version("gfloat")
        assert got == "0.5.2 installed, does not import: RuntimeError: built for another numpy"
        assert install.pinned_version("torchao") is None  # (not installed: no import tried)
    finally:
        install.import_failure.cache_clear()
