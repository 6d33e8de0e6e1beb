"""fp8ref: a reference for FP8 training numerics, built from the format definitions.

The package imports nothing from pytest. ``formats`` and ``codec`` are the ground the test suite
holds torch, ml_dtypes and torchao against; ``conformance`` is the harness that compares them.
Names are loaded on first use, so ``python -m fp8ref diff`` (which reads JSON only) does not pay
for importing torch.
"""

from __future__ import annotations

import importlib
import sys

__version__ = "0.1.0"

_HOMES = {"decode": "codec", "encode": "codec", "round_to_format": "codec",
          **{name: "formats" for name in ("E4M3FN", "E4M3FNUZ", "E5M2", "E5M2FNUZ", "E8M0FNU", "FORMATS",
                                           "FP8_FORMATS", "Fp8Format", "NanRule", "get_format")}}

__all__ = [
    "Fp8Format",
    "NanRule",
    "E4M3FN",
    "E5M2",
    "E4M3FNUZ",
    "E5M2FNUZ",
    "E8M0FNU",
    "FORMATS",
    "FP8_FORMATS",
    "get_format",
    "encode",
    "decode",
    "round_to_format",
    "__version__",
]


def lazy_names(package: str, homes: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package`` (PEP 562): each name in ``homes`` (name ->
    submodule) is imported from its submodule on first use."""

    def getattr_(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{homes[name]}", package), name)

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return getattr_, dir_


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
