"""fp8ref: a reference for FP8 training numerics, built from the format definitions.

The package imports nothing from pytest. ``formats`` and ``codec`` are the ground the test suite
holds torch, ml_dtypes and torchao against; ``conformance`` is the harness that compares them.
"""

from .codec import decode, encode, round_to_format
from .formats import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0FNU, FORMATS, FP8_FORMATS, Fp8Format, NanRule, get_format

__version__ = "0.1.0"

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
