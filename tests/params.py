"""Parametrizations shared by test modules."""

from __future__ import annotations

import pytest

from fp8ref.reference.formats import select

# every format fp8ref derives, one test id per format name
ALL_FORMATS = [pytest.param(f, id=f.name) for f in select(has_torch_dtype=True)]
