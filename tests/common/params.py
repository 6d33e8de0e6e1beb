"""Parametrizations shared by test modules."""

from __future__ import annotations

import pytest

from fp8ref.reference.formats import FORMATS, select

# the five 8-bit formats torch names a dtype for (of the nine fp8ref derives), one id per name
TORCH_FORMATS = [pytest.param(f, id=f.name) for f in select(has_torch_dtype=True)]
# every format fp8ref derives (FP8, E8M0, FP6, FP4, UE4M3), one id per name
ALL_FORMATS = [pytest.param(f, id=f.name) for f in FORMATS.values()]


def on_devices(*gpu_marks: pytest.MarkDecorator) -> pytest.MarkDecorator:
    """One test for the CPU and CUDA where both bodies are the same: parametrizes the ``device``
    fixture (tests/plugins/fixtures.py) by a ``cpu`` case, marked ``cpu``, and a ``cuda`` case,
    marked ``gpu`` and ``gpu_marks`` (an ``sm`` requirement, which only the CUDA case has). The
    ``cuda`` case runs where ``gpu_device`` says: CUDA, the CPU under --fp8-dry-run, else a skip
    naming why. The folder's cpu mark is not added to either (tests/plugins/gating.py)."""
    return pytest.mark.parametrize(
        "device",
        [
            pytest.param("cpu", marks=pytest.mark.cpu, id="cpu"),
            pytest.param("cuda", marks=[pytest.mark.gpu, *gpu_marks], id="cuda"),
        ],
        indirect=True,
    )
