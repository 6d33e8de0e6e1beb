"""fp8ref: a reference for FP8 training numerics, built from the format definitions.

The package imports nothing from pytest. ``formats`` and ``codec`` are the ground the test suite
holds torch, ml_dtypes and torchao against; ``conformance`` is the harness that compares them.
Names are loaded on first use, so ``python -m fp8ref diff`` (which reads JSON only) does not pay
for importing torch.
"""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'fp8ref' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
