"""torch.compile's on-disk caches keyed by the install (fp8ref.harness.stack.compile_cache): set
before anything compiles, so the compiled checks of this run, and of the processes it starts,
never replay code compiled under another torch, torchao or transformers. The header names the
folder."""

from __future__ import annotations

import pytest

from fp8ref.harness.stack.compile_cache import use_install_cache


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_FOLDER] = use_install_cache()


def pytest_report_header(config: pytest.Config) -> str:
    folder = config.stash.get(_FOLDER, None)
    if folder is None:
        return "fp8ref: torch.compile caches shared (FP8REF_COMPILE_CACHE=shared)"
    return f"fp8ref: torch.compile caches for this install: {folder}"


_FOLDER = pytest.StashKey[object]()
