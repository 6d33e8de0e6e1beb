"""A fault inside a compiled FP8 path is caught while torch.compile's caches are warm
(fp8ref.harness.stack.compile_cache): torchao upgraded in place to a copy whose FP8 optimizer
state writes zero codes (a change inside a tensor subclass's ``__torch_dispatch__``, which
AOTAutograd's cache does not hash) must fail the compiled optimizer check, although a clean run
has just warmed the cache with the same graph. A third run shares the warm folder as an unkeyed
cache would (``FP8REF_COMPILE_CACHE=shared``): it must pass on the faulty code, or this test shows
nothing about the keying.

Three runs of the compiled check in processes of their own (a copy of torchao first on the path):
about a minute on 2 cores, so behind --fp8-slow (CI runs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fp8ref.harness.stack.compile_cache import keyed_cache_dir
from tests.common.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs("torchao")]

CHECK = "tests/cpu/install/test_fp8_optimizer.py::test_adamw_fp8_steps_are_adamw_on_the_reference_state"
# torchao's FP8 optimizer state quantizes in quantize_fp8 (torchao/optim/subclass_fp8.py, 0.17-0.18)
HONEST = "codes = input.to(DTYPE).view(-1)"
ZERO_CODES = "codes = (input * 0).to(DTYPE).view(-1)"


def _torchao_copy(site: Path) -> Path:
    import torchao

    source = Path(torchao.__file__).parent
    target = site / "torchao"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    module = target / "optim" / "subclass_fp8.py"
    if HONEST not in module.read_text():
        pytest.fail(f"{module}: no line {HONEST!r} to inject the fault into (torchao {torchao.__version__})")
    return module


def _run_check(site: Path, cache: Path, shared: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FP8REF_COMPILE_CACHE", "TORCHINDUCTOR_"))}
    env |= {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    if shared:
        env["FP8REF_COMPILE_CACHE"] = "shared"
    argv = [sys.executable, "-m", "pytest", CHECK, "--fp8-slow", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _torchao_used(run: subprocess.CompletedProcess) -> str:
    return run.stdout[-2000:] + run.stderr[-2000:]


def test_a_fault_inside_a_compiled_path_is_caught_with_a_warm_cache(tmp_path):
    site, base = tmp_path / "site", tmp_path / "cache"
    module = _torchao_copy(site)
    clean = _run_check(site, base)
    assert clean.returncode == 0, "the compiled check fails on an unchanged torchao copy:\n" + _torchao_used(clean)
    warm = [p for p in base.iterdir() if p.name.startswith("fp8ref-")]
    assert len(warm) == 1, f"the clean run left {warm} under {base}, one keyed folder expected"

    module.write_text(module.read_text().replace(HONEST, ZERO_CODES))  # upgraded in place: same version, path
    faulty = _run_check(site, base)
    assert faulty.returncode == 1, (
        "the compiled optimizer check passed on a torchao whose FP8 state writes zero codes, with the cache a "
        "clean run warmed:\n" + _torchao_used(faulty)
    )
    assert keyed_cache_dir(base, "x").parent == base and len(list(base.glob("fp8ref-*"))) == 2

    stale = _run_check(site, warm[0], shared=True)  # the warm folder, used as an unkeyed cache would be
    assert stale.returncode == 0, (
        "with the clean run's cache shared, the faulty torchao fails too: the keying is not what catches it "
        "here, so this test shows nothing:\n" + _torchao_used(stale)
    )
