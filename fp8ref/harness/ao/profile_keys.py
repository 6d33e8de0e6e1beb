"""The torchao family's profile keys (``torchao``, ``torchao.*`` but its optimizer state and
autocast, which the state family owns): every config field's default and every enum's members,
each recipe's table, digests of its casts, MX, NVFP4 and Float8Linear on fixed inputs, what a
NaN or inf in an activation becomes, its FP4/FP6 casts and its MX scales where the definition
and torchao may part. What each key means: ``meanings.py``."""

from __future__ import annotations

import torch

from ...reference.formats import E2M1FN, E2M3FN, E3M2FN, E4M3FN, select
from ...reference.recipes import TORCHAO_RECIPES
from ..casts import deviations
from ..casts.cast_inputs import all_16bit_inputs, training_tensor_with
from ..casts.conformance import check_cast
from ..stack import install, probes
from ..stack.probing import Where, describe_cast, digest, keys_or_refusal

__all__ = ["collect", "torchao_keys", "narrow_keys", "exact_linear_problem"]


def collect(where: Where) -> dict:
    return torchao_keys(where.device) if where.torchao else {}


def exact_linear_problem(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x (64, 128), weight (64, 128), grad (64, 64))`` in bfloat16 whose FP8 GEMMs are exact in
    any summation order, so a digest of their outputs depends on the casts, scales and recipe,
    not on the CPU's GEMM kernel or thread count.

    Every value is k/128 for k in 128..224 (a bfloat16 significand; the FP8 casts round it) with a
    random sign, and each tensor, row and column holds 1.75. So every scale is a power of two
    (448 / 1.75 = 2^8 for E4M3, 57344 / 1.75 = 2^15 for E5M2; the rowwise recipes round to powers
    of two). Unscaled, every operand value is a multiple of 2^-7 below 2, so every product in a
    GEMM, of FP8 or of bfloat16 values, is a multiple of 2^-14 below 4 (times the power-of-two
    scales): a dot product of at most 128 terms stays below 2^23 such quanta, and every float32
    partial sum is exact in any order."""
    gen = torch.Generator().manual_seed(0)

    def make(rows: int, cols: int) -> torch.Tensor:
        v = (128 + torch.randint(0, 97, (rows, cols), generator=gen).float()) / 128  # 1, 1+2^-7, ..., 1.75
        v[torch.arange(rows), torch.arange(rows) % cols] = 1.75
        v[torch.arange(cols) % rows, torch.arange(cols)] = 1.75
        sign = torch.where(torch.rand(rows, cols, generator=gen) < 0.5, -1.0, 1.0)
        return (v * sign).to(torch.bfloat16).to(device)

    return make(64, 128), make(64, 128), make(64, 64)


def torchao_keys(device: str) -> dict:
    missing = probes.torchao_float8_refusal()
    if missing is not None:
        return {"torchao": missing.split(":", 1)[0] if missing.startswith("missing") else missing}
    from ...reference.scaling import axiswise, tensorwise
    from . import surface
    from . import torchao_compat as ao

    out = surface.profile_keys()  # every config field's default, every enum's members
    for name in TORCHAO_RECIPES:
        out.update(
            keys_or_refusal(
                [f"torchao.recipe.{name}"],
                lambda name=name: {f"torchao.recipe.{name}.{k}": v for k, v in ao.recipe_table(name).items()},
                device=device,
            )
        )
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 128, generator=gen) * 3).to(torch.bfloat16).to(device)
    for tag, g, pow2 in (("tensorwise", tensorwise(), False), ("rowwise", axiswise(-1), True)):
        key = f"torchao.digest.cast.{tag}"
        out.update(
            keys_or_refusal(
                [key],
                lambda g=g, pow2=pow2, key=key: {key: digest(*ao.dynamic_cast(x, E4M3FN, g, pow2))},
                device=device,
            )
        )
    out.update(
        keys_or_refusal(
            ["torchao.mx.default_mode"],
            lambda: {f"torchao.mx.default_mode.{name}": mode for name, mode in ao.mx_default_modes().items()},
            device=device,
        )
    )
    for special in ("nan", "inf"):  # a NaN or inf inside an activation: torchao's scale and codes
        xs = training_tensor_with(special).to(device)
        for g, tag in ((tensorwise(), "tensorwise"), (axiswise(-1), "rowwise")):
            key = f"torchao.special.{special}.{tag}"
            out.update(
                keys_or_refusal(
                    [key],
                    lambda xs=xs, g=g, key=key: {key: describe_cast(*ao.dynamic_cast(xs, E4M3FN, g, False))},
                    device=device,
                )
            )
    out.update(narrow_keys(device))
    xe, we, ge = exact_linear_problem(device)
    with install.one_thread():
        for name in TORCHAO_RECIPES:
            key = f"torchao.digest.float8linear.{name}"
            out.update(
                keys_or_refusal(
                    [key],
                    lambda name=name, key=key: {key: digest(*probes.run_torchao_linear(name, xe, we, ge))},
                    device=device,
                )
            )
    return out


def narrow_keys(device: str) -> dict:
    """torchao's FP4/FP6 casts on every bfloat16 pattern (in-range mismatches against the codec;
    what NaN becomes, which no spec fixes), and digests of its MX FP4/FP6 and NVFP4 quantization
    of one fixed input (a change in rounding, nibble order or the two-level scale changes them)."""
    from . import torchao_compat as ao

    out = {}
    for fmt in (E2M1FN, E2M3FN, E3M2FN):
        key = f"torchao.narrow.{fmt.name}.bf16"

        def probe(fmt=fmt, key=key):
            r = check_cast(ao.narrow_cast(fmt), all_16bit_inputs(torch.bfloat16), fmt, "bf16")
            return {
                f"{key}.in_range_mismatches": r.in_range_mismatches,
                f"{key}.inf": r.inf_mode,
                f"{key}.nan_codes": "|".join(r.nan_codes),
            }

        out.update(
            keys_or_refusal([f"{key}.{k}" for k in ("in_range_mismatches", "inf", "nan_codes")], probe, device=device)
        )
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(32, 128, generator=gen) * torch.exp2(torch.randint(-8, 8, (32, 1), generator=gen).float())).to(
        device
    )
    for elem in select(mx_element=True, narrow=True):
        for mode in ("floor", "rceil", "ceil", "even"):
            key = f"torchao.digest.mx.{elem.name}.{mode}"
            out.update(
                keys_or_refusal(
                    [key],
                    lambda elem=elem, mode=mode, key=key: {key: digest(*ao.to_mx(x, elem, 32, mode))},
                    device=device,
                )
            )
    for mode in ("floor", "rceil", "ceil", "even"):  # which scale a block holding inf/NaN gets: the spec leaves it open
        key = f"torchao.mx.{mode}.special_block_scale"

        def special_probe(mode=mode, key=key):
            words = []
            for special in ("inf", "-inf", "nan"):
                xs = torch.ones(1, 32, device=device)
                xs[0, 5] = float(special)
                words.append(f"{special} 0x{int(ao.to_mx(xs, E4M3FN, 32, mode)[0].reshape(-1)[0]):02x}")
            return {key: " ".join(words)}

        out.update(keys_or_refusal([key], special_probe, device=device))
    for d in deviations.MX_SCALE_DEVIATIONS:
        key = f"torchao.mx.{d.mode}.deviation.{d.key}"
        out.update(keys_or_refusal([key], lambda d=d, key=key: {key: _mx_deviation(d, device)}, device=device))
    key = "torchao.mx.partial_block"  # a row ending inside a block: the reference refuses it
    out.update(keys_or_refusal([key], lambda: {key: _partial_mx_block(device)}, device=device))
    for level in ("single", "two"):
        key = f"torchao.digest.nvfp4.{level}"

        def nvfp4_probe(level=level, key=key):
            g = ao.nvfp4_per_tensor_scale(x.abs().amax()) if level == "two" else None
            return {key: digest(*ao.nvfp4_quantize(x, g))}

        out.update(keys_or_refusal([key], nvfp4_probe, device=device))
    key = "torchao.nvfp4.single.division"
    out.update(keys_or_refusal([key], lambda: {key: _nvfp4_division(device)}, device=device))
    return out


def _nvfp4_division(device: str) -> str:
    """A block whose scale is 3.75 (amax 22.5) holding 18.75: x / s = 5 is an E2M1 tie (to 4),
    x * float32(1 / s) is above it (to 6). Which of fp8ref's two arithmetics torchao follows."""
    from ...reference import nvfp4
    from . import torchao_compat as ao

    x = torch.zeros(1, 16)
    x[0, :3] = torch.tensor([22.5, 18.75, -18.75])
    scales, codes = ao.nvfp4_quantize(x.to(device), None)
    for d in nvfp4.Division:
        q = nvfp4.quantize(x, division=d)
        if torch.equal(codes.cpu(), q.packed()) and torch.equal(scales.cpu().reshape(-1), q.block_scale.reshape(-1)):
            return d.value
    return "other: codes " + " ".join(f"0x{int(c):02x}" for c in codes.reshape(-1)[:2])


def _mx_deviation(d: deviations.MxScaleDeviation, device: str) -> str:
    """Which scale torchao gives blocks whose amax is one float32 ulp above E4M3's max x 2^k,
    for k in -7..7: the definition's, the deviation's, or other codes."""
    from ...reference.quantize import quantize
    from ...reference.scaling import amax, mx
    from . import torchao_compat as ao

    ks = torch.arange(-7, 8, dtype=torch.float32)
    a = torch.nextafter(E4M3FN.max * torch.exp2(ks), torch.tensor(float("inf")))
    x = torch.zeros(len(ks), 32)
    x[:, 0] = a
    got = ao.to_mx(x.to(device), E4M3FN, 32, d.mode)[0].reshape(-1).cpu()
    if torch.equal(got, quantize(x, E4M3FN, mx(32, d.mode)).scale_e8m0.reshape(-1)):
        return "definition"
    if torch.equal(got, d.answer(amax(x, mx(32)).reshape(-1), E4M3FN)):
        return f"deviates: {d.what.split(':')[0]}"
    return "other: codes " + " ".join(f"0x{int(c):02x}" for c in got)


def _partial_mx_block(device: str) -> str:
    from . import torchao_compat as ao

    scale, data = ao.to_mx(torch.ones(2, 48, device=device), E4M3FN, 32, "floor")
    return f"accepted: scales {tuple(scale.shape)}, data {tuple(data.shape)}"
