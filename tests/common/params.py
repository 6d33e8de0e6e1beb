"""Parametrizations shared by test modules."""

from __future__ import annotations

import pytest

from fp8ref.reference.formats import FORMATS, select

# the five 8-bit formats torch names a dtype for (of the nine fp8ref derives), one id per name
TORCH_FORMATS = [pytest.param(f, id=f.name) for f in select(has_torch_dtype=True)]
# every format fp8ref derives (FP8, E8M0, FP6, FP4, UE4M3), one id per name
ALL_FORMATS = [pytest.param(f, id=f.name) for f in FORMATS.values()]
