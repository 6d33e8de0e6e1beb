"""FP8, E8M0 and the narrow MX/NVFP4 formats, derived from their bit layouts.

Nothing here is a copied constant: max, min normal, min subnormal and eps are computed from
the exponent/mantissa widths, the bias and the format's rules for special encodings.

Sources for the bit definitions:
- E4M3FN, E5M2: OCP 8-bit Floating Point Specification (OFP8) rev 1.0. E5M2 follows IEEE 754
  (inf and NaN in the all-ones exponent); E4M3FN has no inf and a single NaN mantissa (S.1111.111),
  which frees the rest of the top binade for finite values.
- E4M3FNUZ, E5M2FNUZ: Graphcore/AMD "FNUZ" formats (as in LLVM's APFloat and ml_dtypes):
  bias one larger than IEEE, no inf, no negative zero, the single NaN is 0x80.
- E8M0FNU: OCP Microscaling (MX) v1.0 scale format: 8 exponent bits, no mantissa, no sign,
  no zero, bias 127, NaN = 0xFF.
- E2M1FN (FP4), E2M3FN and E3M2FN (FP6): OCP MX v1.0 element formats: IEEE-like bias, subnormals,
  and *no* inf or NaN: every exponent field is finite (so max is 6, 7.5 and 28).
- UE4M3: NVFP4's block scale (NVIDIA Blackwell block-scaled formats): E4M3FN without the sign
  bit, 7 bits, NaN = 0x7F; stored in a float8_e4m3fn byte with the sign bit clear, so a UE4M3
  code and the E4M3FN code of the same value are one byte.

Codes are unsigned integers of ``bits`` bits, sign (if any) in the top bit.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Iterable

from .validate import Choice, choice

__all__ = [
    "NanRule",
    "FloatFormat",
    "E4M3FN",
    "E5M2",
    "E4M3FNUZ",
    "E5M2FNUZ",
    "E8M0FNU",
    "E2M1FN",
    "E2M3FN",
    "E3M2FN",
    "UE4M3",
    "FORMATS",
    "select",
    "get_format",
    "as_format",
    "formats_table",
]


class NanRule(Choice):
    """Which codes of a format are NaN (and so whether it has inf and -0)."""

    IEEE = "ieee"  # all-ones exponent with a non-zero mantissa; all-ones exponent, zero mantissa: +-inf
    FN = "fn"  # only all-ones exponent *and* all-ones mantissa (both signs); no inf
    FNUZ = "fnuz"  # only 0x80 (the code that would be negative zero); no inf, no -0
    E8M0 = "e8m0"  # only 0xFF; no sign bit, no zero, no inf
    NONE = "none"  # no NaN and no inf: every code is finite (OCP MX FP6/FP4)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FloatFormat:
    """One floating-point format of at most 8 bits, described by its bits (built by keyword:
    ``FloatFormat(name=..., exp_bits=..., man_bits=..., bias=..., signed=..., nan_rule=...,
    torch_name=..., ml_dtypes_name=..., bits=8)``). ``nan_rule`` is a ``NanRule`` or its value;
    ``torch_name``/``ml_dtypes_name`` are ``""`` where that library has no such scalar type."""

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool
    nan_rule: NanRule
    torch_name: str
    ml_dtypes_name: str
    bits: int = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "nan_rule", choice(self.nan_rule, NanRule, "nan_rule"))
        if not isinstance(self.bits, int) or not 2 <= self.bits <= 8:
            raise ValueError(f"bits: expected an int in [2, 8], got {self.bits!r}")
        if self.signed + self.exp_bits + self.man_bits != self.bits:
            raise ValueError(
                f"{self.name}: sign + exponent + mantissa bits must be {self.bits}, got "
                f"{int(self.signed)} + {self.exp_bits} + {self.man_bits}"
            )

    # --- properties of the encoding -------------------------------------------------------
    @property
    def has_torch_dtype(self) -> bool:
        """torch names a dtype for it (this torch may still lack it: ``torch_dtype()`` says)."""
        return bool(self.torch_name)

    @property
    def narrow(self) -> bool:
        """Narrower than a byte (FP4, FP6, UE4M3)."""
        return self.bits < 8

    @property
    def mx_element(self) -> bool:
        """An OCP MX v1.0 element format (MXFP8 E4M3/E5M2, MXFP6, MXFP4): signed, not FNUZ."""
        return self.signed and self.nan_rule in (NanRule.FN, NanRule.IEEE, NanRule.NONE)

    @property
    def has_inf(self) -> bool:
        return self.nan_rule == NanRule.IEEE

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.nan_rule != NanRule.FNUZ

    @property
    def has_nan(self) -> bool:
        return self.nan_rule != NanRule.NONE

    @property
    def n_codes(self) -> int:
        return 1 << self.bits

    @property
    def has_zero(self) -> bool:
        return self.nan_rule != NanRule.E8M0

    @property
    def has_subnormals(self) -> bool:
        # E8M0's exponent field 0 is the ordinary value 2^-127: it has no mantissa to denormalise.
        return self.man_bits > 0

    @property
    def exp_field_max(self) -> int:
        return (1 << self.exp_bits) - 1

    def is_nan_code(self, code: int) -> bool:
        sign, exp, man = self.split(code)
        if self.nan_rule == NanRule.IEEE:
            return exp == self.exp_field_max and man != 0
        if self.nan_rule == NanRule.FN:
            return exp == self.exp_field_max and man == (1 << self.man_bits) - 1
        if self.nan_rule == NanRule.FNUZ:
            return code == 1 << (self.bits - 1)  # the would-be negative zero
        if self.nan_rule == NanRule.E8M0:
            return code == self.n_codes - 1
        return False  # NanRule.NONE

    def is_inf_code(self, code: int) -> bool:
        _, exp, man = self.split(code)
        return self.nan_rule == NanRule.IEEE and exp == self.exp_field_max and man == 0

    def split(self, code: int) -> tuple[int, int, int]:
        """(sign, biased exponent field, mantissa field) of a code."""
        if not 0 <= code < self.n_codes:
            raise ValueError(f"code: expected an integer in [0, {self.n_codes - 1}], got {code!r}")
        sign = (code >> (self.bits - 1)) & 1 if self.signed else 0
        exp = (code >> self.man_bits) & self.exp_field_max
        man = code & ((1 << self.man_bits) - 1)
        return sign, exp, man

    def value_of(self, code: int) -> float:
        """The real value of one code (Python float: exact for every format here)."""
        if self.is_nan_code(code):
            return math.nan
        sign, exp, man = self.split(code)
        s = -1.0 if sign else 1.0
        if self.is_inf_code(code):
            return s * math.inf
        if exp == 0 and self.has_subnormals:
            # subnormal: 0.man x 2^(1 - bias)
            return s * math.ldexp(man, 1 - self.bias - self.man_bits)
        # normal: 1.man x 2^(exp - bias)
        return s * math.ldexp((1 << self.man_bits) + man, exp - self.bias - self.man_bits)

    def all_values(self) -> list[float]:
        """The value of each code (``n_codes`` of them), indexed by code."""
        return [self.value_of(c) for c in range(self.n_codes)]

    # --- derived constants (computed once per format; the dataclass is frozen) ---------------
    @functools.cached_property
    def max_code(self) -> int:
        """The code of the largest finite value."""
        return max(
            (c for c in range(self.n_codes >> 1 if self.signed else self.n_codes) if math.isfinite(self.value_of(c))),
            key=self.value_of,
        )

    @functools.cached_property
    def max(self) -> float:
        return self.value_of(self.max_code)

    @functools.cached_property
    def min_normal(self) -> float:
        """Smallest positive normal value (for E8M0, the smallest value: 2^-bias)."""
        first = 1 if self.has_subnormals else 0
        return math.ldexp(1.0, first - self.bias)

    @functools.cached_property
    def min_subnormal(self) -> float:
        """Smallest positive value; equals min_normal when the format has no subnormals."""
        if not self.has_subnormals:
            return self.min_normal
        return math.ldexp(1.0, 1 - self.bias - self.man_bits)

    @functools.cached_property
    def eps(self) -> float:
        """Distance from 1.0 to the next larger value (2^-man_bits; 1.0 for E8M0)."""
        return math.ldexp(1.0, -self.man_bits)

    @functools.cached_property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal value."""
        return math.frexp(self.min_normal)[1] - 1

    @functools.cached_property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite value."""
        return math.frexp(self.max)[1] - 1

    @functools.cached_property
    def nan_codes(self) -> tuple[int, ...]:
        return tuple(c for c in range(self.n_codes) if self.is_nan_code(c))

    @functools.cached_property
    def inf_codes(self) -> tuple[int, ...]:
        return tuple(c for c in range(self.n_codes) if self.is_inf_code(c))

    @functools.cached_property
    def canonical_nan_code(self) -> int | None:
        """The NaN the codec writes for a positive NaN (negative NaN sets the sign bit where one
        exists); ``None`` for a format without NaN."""
        if not self.nan_codes:
            return None
        positive = [c for c in self.nan_codes if not self.signed or c < self.n_codes >> 1]
        return max(positive) if self.nan_rule in (NanRule.IEEE, NanRule.FN) else self.nan_codes[0]

    def torch_dtype(self):
        """The matching one-element-per-byte torch dtype (``torch.float8_*``), or ``None`` when
        this torch lacks it or none exists (FP4 is only ``float4_e2m1fn_x2``, two per byte)."""
        import torch

        return getattr(torch, self.torch_name, None) if self.torch_name else None

    def ml_dtype(self):
        """The matching ml_dtypes scalar type, or ``None`` when ml_dtypes is missing or lacks it."""
        if not self.ml_dtypes_name:
            return None
        try:
            import ml_dtypes
        except ImportError:
            return None
        return getattr(ml_dtypes, self.ml_dtypes_name, None)

    def describe(self) -> dict:
        """The format's derived constants as a plain dict (stable key order)."""
        return {
            "name": self.name,
            "bits": self.bits,
            "exp_bits": self.exp_bits,
            "man_bits": self.man_bits,
            "bias": self.bias,
            "signed": self.signed,
            "has_inf": self.has_inf,
            "has_negative_zero": self.has_negative_zero,
            "has_zero": self.has_zero,
            "nan_codes": [f"0x{c:02x}" for c in self.nan_codes],
            "max": self.max,
            "min_normal": self.min_normal,
            "min_subnormal": self.min_subnormal,
            "eps": self.eps,
        }

    def __str__(self) -> str:
        return self.name


def _ieee_bias(exp_bits: int) -> int:
    return (1 << (exp_bits - 1)) - 1


E4M3FN = FloatFormat(
    name="e4m3fn",
    exp_bits=4,
    man_bits=3,
    bias=_ieee_bias(4),
    signed=True,
    nan_rule=NanRule.FN,
    torch_name="float8_e4m3fn",
    ml_dtypes_name="float8_e4m3fn",
)
E5M2 = FloatFormat(
    name="e5m2",
    exp_bits=5,
    man_bits=2,
    bias=_ieee_bias(5),
    signed=True,
    nan_rule=NanRule.IEEE,
    torch_name="float8_e5m2",
    ml_dtypes_name="float8_e5m2",
)
# FNUZ: the bias is one larger than IEEE's, so the top binade is finite and 0x80 is the only NaN.
E4M3FNUZ = FloatFormat(
    name="e4m3fnuz",
    exp_bits=4,
    man_bits=3,
    bias=_ieee_bias(4) + 1,
    signed=True,
    nan_rule=NanRule.FNUZ,
    torch_name="float8_e4m3fnuz",
    ml_dtypes_name="float8_e4m3fnuz",
)
E5M2FNUZ = FloatFormat(
    name="e5m2fnuz",
    exp_bits=5,
    man_bits=2,
    bias=_ieee_bias(5) + 1,
    signed=True,
    nan_rule=NanRule.FNUZ,
    torch_name="float8_e5m2fnuz",
    ml_dtypes_name="float8_e5m2fnuz",
)
E8M0FNU = FloatFormat(
    name="e8m0fnu",
    exp_bits=8,
    man_bits=0,
    bias=_ieee_bias(8),
    signed=False,
    nan_rule=NanRule.E8M0,
    torch_name="float8_e8m0fnu",
    ml_dtypes_name="float8_e8m0fnu",
)

# OCP MX v1.0 narrow element formats: IEEE bias, subnormals, every code finite.
E2M1FN = FloatFormat(
    name="e2m1fn",
    bits=4,
    exp_bits=2,
    man_bits=1,
    bias=_ieee_bias(2),
    signed=True,
    nan_rule=NanRule.NONE,
    torch_name="",
    ml_dtypes_name="float4_e2m1fn",
)
E2M3FN = FloatFormat(
    name="e2m3fn",
    bits=6,
    exp_bits=2,
    man_bits=3,
    bias=_ieee_bias(2),
    signed=True,
    nan_rule=NanRule.NONE,
    torch_name="",
    ml_dtypes_name="float6_e2m3fn",
)
E3M2FN = FloatFormat(
    name="e3m2fn",
    bits=6,
    exp_bits=3,
    man_bits=2,
    bias=_ieee_bias(3),
    signed=True,
    nan_rule=NanRule.NONE,
    torch_name="",
    ml_dtypes_name="float6_e3m2fn",
)
# NVFP4's block scale: E4M3FN's positive half (no library has it as a scalar type of its own).
UE4M3 = FloatFormat(
    name="ue4m3",
    bits=7,
    exp_bits=4,
    man_bits=3,
    bias=_ieee_bias(4),
    signed=False,
    nan_rule=NanRule.FN,
    torch_name="",
    ml_dtypes_name="",
)

# Every format, by name: the one registry. Subsets are asked for by property with ``select``.
FORMATS: dict[str, FloatFormat] = {
    f.name: f for f in (E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ, E8M0FNU, E2M1FN, E2M3FN, E3M2FN, UE4M3)
}


def select(**conditions: object) -> tuple[FloatFormat, ...]:
    """The formats (in ``FORMATS`` order) whose properties have the given values, e.g.
    ``select(has_torch_dtype=True)`` (the five 8-bit formats torch has dtypes for),
    ``select(bits=8, signed=True)`` (the FP8 element formats), ``select(narrow=True)`` (FP4, FP6,
    UE4M3), ``select(mx_element=True)`` (what an OCP MX block may hold)."""
    unknown = sorted(k for k in conditions if not hasattr(E4M3FN, k))
    if unknown:
        raise ValueError(f"conditions: expected properties of a FloatFormat, got {unknown}")
    return tuple(f for f in FORMATS.values() if all(getattr(f, k) == v for k, v in conditions.items()))


def get_format(fmt: str | FloatFormat) -> FloatFormat:
    """Look a format up by name (``"e4m3fn"``, ``"float8_e4m3fn"``, ``"float4_e2m1fn"``), or pass
    one through."""
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str):
        key = re.sub(r"^float[468]_", "", fmt.lower().removeprefix("torch."))
        if key in FORMATS:
            return FORMATS[key]
        raise ValueError(f"fmt: expected one of {sorted(FORMATS)}, got {fmt!r}")
    raise TypeError(f"fmt: expected a FloatFormat or a format name, got {type(fmt).__name__}")


def as_format(fmt: FloatFormat, name: str = "fmt") -> FloatFormat:
    """``fmt`` itself when it is a FloatFormat, else a TypeError: the harness takes formats resolved
    once at its edge (``get_format`` turns a name into one there)."""
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"{name}: expected a FloatFormat (get_format({fmt!r}) gives one), got {type(fmt).__name__}")
    return fmt


def formats_table(formats: Iterable[FloatFormat] = FORMATS.values()) -> str:
    """A plain-text table of the derived constants (for ``python -m fp8ref formats``)."""
    cols = [
        "name",
        "bits",
        "exp_bits",
        "man_bits",
        "bias",
        "has_inf",
        "has_negative_zero",
        "max",
        "min_normal",
        "min_subnormal",
        "eps",
        "nan_codes",
    ]
    rows = [[str(f.describe()[c]) if c != "nan_codes" else " ".join(f.describe()[c]) for c in cols] for f in formats]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    fmt_row = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths))  # noqa: E731
    return "\n".join([fmt_row(cols), fmt_row(["-" * w for w in widths]), *map(fmt_row, rows)])
