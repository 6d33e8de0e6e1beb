"""Parametrizations shared by test modules."""

from __future__ import annotations

import pytest

from fp8ref.formats import FORMATS

# every format fp8ref derives, one test id per format name
ALL_FORMATS = [pytest.param(f, id=f.name) for f in FORMATS.values()]
