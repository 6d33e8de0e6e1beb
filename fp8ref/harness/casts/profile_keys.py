"""The casts family's profile keys (``finfo.*``, ``cast.*``): torch's finfo of each float8 dtype;
every cast into float8 from bfloat16, float16 and float64, held to the codec (in-range
mismatches, overflow, inf, NaN codes); conversions between float8 dtypes and ``copy_`` into them;
and a few named inputs whose treatment varies (-0.0, E8M0's ties, the named deviations).
What each key means: ``meanings.py``."""

from __future__ import annotations

import torch

from ...reference.formats import E8M0FNU, select
from ..stack import probes
from ..stack.probing import Where, keys_or_refusal
from . import deviations
from .cast_inputs import all_16bit_inputs
from .conformance import CastReport, check_cast, float64_rounding
from .implementations import torch_cast

__all__ = ["collect", "finfo_keys", "cast_keys", "conversion_keys", "special_cast_keys"]


def collect(where: Where) -> dict:
    return finfo_keys() | cast_keys(where.device) | conversion_keys(where.device) | special_cast_keys(where.device)


def finfo_keys() -> dict:
    out = {}
    for fmt in select(has_torch_dtype=True):
        dtype = fmt.torch_dtype()
        if dtype is None:
            out[f"finfo.{fmt.name}"] = "missing"
            continue
        keys = [f"finfo.{fmt.name}.{field}" for field in ("max", "tiny", "eps")]

        def probe(dtype=dtype, keys=keys):
            fi = torch.finfo(dtype)
            return {k: float(getattr(fi, k.rsplit(".", 1)[1])) for k in keys}

        out.update(keys_or_refusal(keys, probe))
    # FP4 exists in torch only as a two-per-byte storage dtype, without casts
    out["finfo.float4_e2m1fn_x2"] = "present" if hasattr(torch, "float4_e2m1fn_x2") else "missing"
    return out


def cast_keys(device: str) -> dict:
    out = {}
    for fmt in select(has_torch_dtype=True):
        impl = torch_cast(fmt, device)
        if impl is None:
            out[f"cast.{fmt.name}"] = "missing"
            continue
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            key = f"cast.{fmt.name}.{tag}"

            def probe(impl=impl, dtype=dtype, fmt=fmt, key=key, tag=tag):
                r = check_cast(impl, all_16bit_inputs(dtype), fmt, tag)
                res = {
                    f"{key}.in_range_mismatches": r.in_range_mismatches,
                    f"{key}.overflow": r.overflow_mode,
                    f"{key}.inf": r.inf_mode,
                    f"{key}.nan_codes": "|".join(r.nan_codes),
                }
                if r.no_encoding != "n/a":
                    res[f"{key}.no_encoding"] = r.no_encoding
                return res

            out.update(
                keys_or_refusal(
                    [f"{key}.{k}" for k in ("in_range_mismatches", "overflow", "inf", "nan_codes")],
                    probe,
                    device=device,
                )
            )
        key = f"cast.{fmt.name}.f64.rounding"  # once, or through float32 first (a double rounding)
        out.update(
            keys_or_refusal(
                [key], lambda impl=impl, fmt=fmt, key=key: {key: float64_rounding(impl, fmt)}, device=device
            )
        )
    return out


def conversion_keys(device: str) -> dict:
    """Between float8 dtypes (``.to``) and into float8 tensors (``copy_``): the implementation-
    defined answers (overflow, inf, NaN codes, zero and negatives into E8M0), and in-range
    mismatches with the definition if any. A copy_ that behaves as the cast reads ``as .to``."""
    from .float8_conversions import check_float8_to_float8, copy_into, modes_word

    def answer(r: CastReport) -> str:
        return modes_word(r) + (f" in_range_mismatches={r.in_range_mismatches}" if r.in_range_mismatches else "")

    out: dict = {}
    formats = probes.float8_formats()
    for dst in formats:
        for src in formats:
            if src == dst:
                continue
            key, copy_key = f"cast.{dst.name}.from_{src.name}", f"cast.{dst.name}.copy_from_{src.name}"

            def pair(src=src, dst=dst, key=key, copy_key=copy_key):
                to, cp = (answer(check_float8_to_float8(src, dst, how, device)) for how in ("to", "copy_"))
                return {key: to, copy_key: "as .to" if cp == to else cp}

            out.update(keys_or_refusal([key, copy_key], pair, device=device))
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            key = f"cast.{dst.name}.copy_from_{tag}"

            def copied(dst=dst, dtype=dtype, key=key):
                x = all_16bit_inputs(dtype)
                impl = torch_cast(dst, device)
                assert impl is not None
                to, cp = (answer(check_cast(i, x, dst)) for i in (impl, copy_into(dst, device)))
                return {key: "as .to" if cp == to else cp}

            out.update(keys_or_refusal([key], copied, device=device))
        key = f"cast.{dst.name}.copy_from_f64.rounding"
        out.update(
            keys_or_refusal(
                [key], lambda dst=dst, key=key: {key: float64_rounding(copy_into(dst, device), dst)}, device=device
            )
        )
    return out


def special_cast_keys(device: str) -> dict:
    """A few named inputs whose treatment varies: -0.0 in each format, E8M0's tie and zero."""
    out = {}
    for fmt in select(has_torch_dtype=True):
        impl = torch_cast(fmt, device)
        if impl is None:
            continue
        key = f"cast.{fmt.name}.f32.neg_zero"
        out.update(
            keys_or_refusal(
                [key],
                lambda impl=impl, key=key: {key: f"0x{int(impl.cast(torch.tensor([-0.0]))[0]):02x}"},
                device=device,
            )
        )
    for d in deviations.DEVIATIONS:
        impl = torch_cast(d.fmt, device)
        if impl is not None:
            key = f"cast.{d.fmt.name}.deviation.{d.key}"
            out.update(
                keys_or_refusal(
                    [key], lambda impl=impl, d=d, key=key: {key: deviations.observe(impl, d)}, device=device
                )
            )
    impl = torch_cast(E8M0FNU, device)
    if impl is not None:
        ties = torch.tensor([1.5, 0.75, 3 * 2.0**-128, 0.0], dtype=torch.float32)
        key = "cast.e8m0fnu.f32.ties_and_zero"
        out.update(
            keys_or_refusal([key], lambda: {key: " ".join(f"0x{int(c):02x}" for c in impl.cast(ties))}, device=device)
        )
    return out
