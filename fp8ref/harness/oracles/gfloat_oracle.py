"""gfloat (Graphcore's generic floating-point library) in fp8ref's terms: a third, independent
oracle beside the definition and ml_dtypes. Imported lazily; ``available()`` says whether it is
installed.

Which gfloat format stands for which fp8ref format (``gfloat_format``): OCP E4M3/E5M2/E8M0 and
the MX FP6/FP4 element formats by name; E4M3FNUZ and E5M2FNUZ are gfloat's P3109 8-bit signed
*finite* formats with precision 4 and 3 (bias 8 and 16, no inf, NaN 0x80, no -0: every code
decodes alike). UE4M3 has no gfloat format.

What gfloat leaves undefined or reads differently (``undefined_in_gfloat``), left out of every
comparison and named in each test's report:
- ``fp4/fp6 overflow without saturation``: a format with neither inf nor NaN raises there;
- ``E8M0 below its smallest value``: gfloat returns 2^-128 or smaller, values E8M0 does not have
  (under RNE below 1.5 x 2^-128, where rounding to 2^-127 stops; under RTZ and SR below 2^-127);
- ``E8M0 zero``: gfloat returns 0, which E8M0 does not have;
- ``negative into an unsigned format``: gfloat returns the negative value;
- ``E8M0 ties``: gfloat rounds 1.5 x 2^e to the neighbour with the even exponent field, fp8ref
  (with torch and ml_dtypes) up; the codec's docstring states fp8ref's rule and why.

Stochastic rounding: gfloat's ``Stochastic`` mode with ``n`` bits ``s`` goes up when
``s >= 2^n - round(p * 2^n)``; fp8ref's when ``r < p * 2^24``. With ``s = 2^24 - 1 - r`` these are
one rule wherever ``p * 2^24`` is an integer (every float16 input; every input at most
``man_bits + 1`` binades below the smallest normal), so SR is compared there.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

from ...reference.definition import SR_BITS, overflows, sr_up_probability
from ...reference.formats import FloatFormat

__all__ = ["available", "version", "gfloat_format", "decode_all", "round_values", "undefined_in_gfloat", "mx_block"]


def available() -> bool:
    return importlib.util.find_spec("gfloat") is not None


def version() -> str:
    from importlib.metadata import version as _version

    return _version("gfloat")


def gfloat_format(fmt: FloatFormat) -> Any:
    """gfloat's ``FormatInfo`` for ``fmt``, or None where gfloat has none (UE4M3)."""
    from gfloat import Domain, Signedness
    from gfloat import formats as gf

    table = {
        "e4m3fn": gf.format_info_ocp_e4m3,
        "e5m2": gf.format_info_ocp_e5m2,
        "e4m3fnuz": gf.format_info_p3109(8, 4, Signedness.Signed, Domain.Finite),
        "e5m2fnuz": gf.format_info_p3109(8, 3, Signedness.Signed, Domain.Finite),
        "e8m0fnu": gf.format_info_ocp_e8m0,
        "e2m1fn": gf.format_info_ocp_e2m1,
        "e2m3fn": gf.format_info_ocp_e2m3,
        "e3m2fn": gf.format_info_ocp_e3m2,
    }
    return table.get(fmt.name)


def decode_all(fmt: FloatFormat) -> torch.Tensor:
    """gfloat's value of every code of ``fmt`` (float64, indexed by code)."""
    import numpy as np
    from gfloat import decode_ndarray

    return torch.from_numpy(np.asarray(decode_ndarray(gfloat_format(fmt), np.arange(fmt.n_codes)), dtype=np.float64))


def round_values(
    x: torch.Tensor, fmt: FloatFormat, *, rounding: str, saturate: bool, random_bits: torch.Tensor | None = None
) -> torch.Tensor:
    """``x`` rounded to ``fmt`` by gfloat's ``round_ndarray`` (float64 values). ``rounding``:
    ``rne``, ``rtz`` or ``sr`` (with fp8ref's ``random_bits``, mirrored into gfloat's)."""
    from gfloat import RoundMode, round_ndarray

    v = x.double().numpy()
    if rounding == "sr":
        assert random_bits is not None
        s = ((1 << SR_BITS) - 1 - random_bits.to(torch.int64)).numpy()
        out = round_ndarray(gfloat_format(fmt), v, RoundMode.Stochastic, saturate, srbits=s, srnumbits=SR_BITS)
    else:
        mode = {"rne": RoundMode.TiesToEven, "rtz": RoundMode.TowardZero}[rounding]
        out = round_ndarray(gfloat_format(fmt), v, mode, saturate)
    return torch.from_numpy(out.astype("float64"))


def undefined_in_gfloat(x: torch.Tensor, fmt: FloatFormat, *, rounding: str, saturate: bool) -> dict[str, torch.Tensor]:
    """The inputs gfloat leaves undefined or reads differently (module docstring), by reason."""
    xd = x.double()
    a = xd.abs()
    out: dict[str, torch.Tensor] = {}
    if not fmt.has_nan and not saturate:
        if rounding == "rtz":
            over = torch.isinf(a)  # a finite overflow goes to max under RTZ, as IEEE 754 says
        elif rounding == "sr":
            over = a > fmt.max  # SR past max overflows on some draws
        else:
            over = overflows(x, fmt) | torch.isinf(a)
        out["fp4/fp6 overflow without saturation"] = over
    if not fmt.signed:
        out["negative into an unsigned format"] = torch.signbit(xd) & (a != 0) & ~torch.isnan(xd)
    if fmt.name == "e8m0fnu":
        # gfloat rounds on below 2^-127 as if E8M0 had smaller values: 2^-128 and less come back
        # (under RNE only below 1.5 x 2^-128, the midpoint; under RTZ and SR below 2^-127)
        below = 1.5 * 2.0**-128 if rounding == "rne" else 2.0**-127
        out["E8M0 below its smallest value"] = (a < below) & (a != 0)
        out["E8M0 zero"] = a == 0
        m, _ = torch.frexp(torch.where(torch.isfinite(a) & (a > 0), a, torch.ones_like(a)))
        out["E8M0 ties"] = (m == 0.75) & torch.isfinite(a)
    if rounding == "sr":
        finite = torch.isfinite(a)
        p = sr_up_probability(torch.where(finite, xd, torch.zeros_like(xd)).to(x.dtype), fmt) * 2.0**SR_BITS
        out["SR where p * 2^24 is not an integer"] = finite & (p != torch.floor(p))
    return out


def mx_block(values: torch.Tensor, element: FloatFormat) -> tuple[float, torch.Tensor]:
    """gfloat's MX quantization of one block (OCP MX v1.0 scale from the block's amax, elements
    saturated, RNE): ``(scale X, decoded values x * X ...)`` as gfloat's ``quantize_block``."""
    import numpy as np
    from gfloat import RoundMode, compute_scale_amax, quantize_block
    from gfloat.block import BlockFormatInfo
    from gfloat.formats import format_info_ocp_e8m0

    fi = BlockFormatInfo(f"mx_{element.name}", gfloat_format(element), values.numel(), format_info_ocp_e8m0)
    v = values.double().numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = float(compute_scale_amax(fi.etype.emax, v))
        decoded = quantize_block(fi, v, compute_scale_amax, RoundMode.TiesToEven)
    return scale, torch.from_numpy(np.asarray(decoded, dtype=np.float64))
