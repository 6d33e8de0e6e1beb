"""fp8ref: a reference for FP8 training numerics, built from the format definitions.

Only ``fp8ref.pytest_plugin``, which pytest loads through the package's entry point, and its
golden half ``fp8ref.pytest_golden`` import pytest. The package has three layers, one folder each, and each imports
only from the ones above it in this list (``tests/cpu/tools/test_layers.py`` checks it):

- ``fp8ref.reference``: the formats from their bits, the codec, scales, quantization, recipes,
  delayed scaling, emulated GEMMs and linears, metrics. torch and the standard library only; it
  never calls what it checks (a native float8 cast, ``torch._scaled_mm``, torchao).
- ``fp8ref.harness``: the install under test, its capability probes and refusals, the casts and
  GEMMs under test and their comparison with the reference, the behaviour profile, benchmarks.
- ``fp8ref.finetune``, ``python -m fp8ref``, ``fp8ref.pytest_plugin`` and ``fp8ref.pytest_golden``:
  the application (bf16 vs FP8 training, the CLI, the pytest plugin).

The names below are loaded on first use, so ``python -m fp8ref diff`` (which reads JSON only)
does not pay for importing torch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# public name -> the module that defines it (the one table: __all__ is made from it)
_HOMES = {
    **dict.fromkeys(("decode", "encode", "round_to_format"), "reference.codec"),
    **dict.fromkeys(
        (
            "E4M3FN",
            "E4M3FNUZ",
            "E5M2",
            "E5M2FNUZ",
            "E8M0FNU",
            "FORMATS",
            "FloatFormat",
            "NanRule",
            "get_format",
            "select",
        ),
        "reference.formats",
    ),
}

if TYPE_CHECKING:  # the names as the type checker sees them at run time they load lazily
    from .reference.codec import decode as decode
    from .reference.codec import encode as encode
    from .reference.codec import round_to_format as round_to_format
    from .reference.formats import E4M3FN as E4M3FN
    from .reference.formats import E4M3FNUZ as E4M3FNUZ
    from .reference.formats import E5M2 as E5M2
    from .reference.formats import E5M2FNUZ as E5M2FNUZ
    from .reference.formats import E8M0FNU as E8M0FNU
    from .reference.formats import FORMATS as FORMATS
    from .reference.formats import FloatFormat as FloatFormat
    from .reference.formats import NanRule as NanRule
    from .reference.formats import get_format as get_format
    from .reference.formats import select as select

__all__ = [*_HOMES, "__version__"]


def lazy_names(package: str, homes: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` (PEP 562): each name in ``homes`` (name ->
    submodule) is imported from its submodule on first use."""

    def getattr_(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{homes[name]}", package), name)

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return getattr_, dir_


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
