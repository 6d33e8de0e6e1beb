"""The behaviour profile of an install: what it does where correct installs may differ.

A profile is JSON: ``versions`` (what produced it) and ``behaviour``, a flat, sorted mapping of
dotted keys to plain values, so a difference reads as one line per key (the file format and the
diff: ``profile_file``; the pinned goldens: ``golden``). This module is a thin list
of probes: each asks the module that knows the behaviour (``conformance`` for casts, ``install``
for what the install accepts, ``torchao_compat`` for torchao's recipe table and casts, ``emulate``
for the MLP) and writes down the answer. Invariants are asserted elsewhere; the profile holds what
legitimately varies.

Every probe is isolated: when the install refuses an operation (``fp8ref.harness.stack.refusals``), the keys of
that probe read ``refused: Type: message`` and every other key is still collected, so an older
or newer install yields a profile whose diff names what changed. An error that is not a refusal
is a bug in fp8ref and propagates.

Probes whose answer depends on floating-point summation order run on inputs that make every sum
exact (``exact_linear_problem``), or with one intra-op thread and a stated tolerance
(``TOLERANCES``), so the answer does not depend on the machine's CPU or core count.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

import torch

from ...reference.formats import E2M1FN, E2M3FN, E3M2FN, E4M3FN, E8M0FNU, select
from ...reference.recipes import TORCHAO_RECIPES
from ..casts import deviations
from ..casts.cast_inputs import all_16bit_inputs, training_tensor_with
from ..casts.conformance import CastReport, check_cast, float64_rounding
from ..casts.implementations import torch_cast
from ..stack import install, probes
from ..stack.install import device_kind, versions
from ..stack.refusals import attempt, observe
from .profile_file import PROFILE_VERSION

__all__ = ["collect", "exact_linear_problem"]


def _describe_cast(codes: torch.Tensor, scale: torch.Tensor) -> str:
    """A small cast, readably: its scales and its codes in hex."""
    hexes = " ".join(f"{int(c):02x}" for c in codes.flatten().tolist())
    return f"scale {[float(v) for v in scale.flatten().tolist()]}; codes {hexes}"


def _sha(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().reshape(-1).contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _isolated(keys: list[str], probe: Callable[..., dict], device: str = "cpu") -> dict:
    """``probe()``'s keys, or each of ``keys`` set to the install's refusal (``refused: ...``) or
    its failure (``fails: ...``: an error of the install on an input it supports) when the probe
    meets one (``refusals.observe``). An error of fp8ref's own propagates, and so does a device
    fault, which a CUDA ``device`` is synchronized for: see ``fp8ref.harness.stack.refusals``."""
    ok, result = observe(probe, device)
    return result if ok and isinstance(result, dict) else {k: result for k in keys}


# --- probes ---------------------------------------------------------------------------------
def _probe_finfo() -> dict:
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

        out.update(_isolated(keys, probe))
    # FP4 exists in torch only as a two-per-byte storage dtype, without casts
    out["finfo.float4_e2m1fn_x2"] = "present" if hasattr(torch, "float4_e2m1fn_x2") else "missing"
    return out


def _probe_casts(device: str) -> dict:
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
                _isolated(
                    [f"{key}.{k}" for k in ("in_range_mismatches", "overflow", "inf", "nan_codes")],
                    probe,
                    device=device,
                )
            )
        key = f"cast.{fmt.name}.f64.rounding"  # once, or through float32 first (a double rounding)
        out.update(
            _isolated([key], lambda impl=impl, fmt=fmt, key=key: {key: float64_rounding(impl, fmt)}, device=device)
        )
    return out


def _probe_float8_conversions(device: str) -> dict:
    """Between float8 dtypes (``.to``) and into float8 tensors (``copy_``): the implementation-
    defined answers (overflow, inf, NaN codes, zero and negatives into E8M0), and in-range
    mismatches with the definition if any. A copy_ that behaves as the cast reads ``as .to``."""
    from ..casts.float8_conversions import check_float8_to_float8, copy_into, modes_word

    def word(r: CastReport) -> str:
        return modes_word(r) + (f" in_range_mismatches={r.in_range_mismatches}" if r.in_range_mismatches else "")

    out: dict = {}
    formats = probes.float8_formats()
    for dst in formats:
        for src in formats:
            if src == dst:
                continue
            key, copy_key = f"cast.{dst.name}.from_{src.name}", f"cast.{dst.name}.copy_from_{src.name}"

            def pair(src=src, dst=dst, key=key, copy_key=copy_key):
                to, cp = (word(check_float8_to_float8(src, dst, how, device)) for how in ("to", "copy_"))
                return {key: to, copy_key: "as .to" if cp == to else cp}

            out.update(_isolated([key, copy_key], pair, device=device))
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            key = f"cast.{dst.name}.copy_from_{tag}"

            def copied(dst=dst, dtype=dtype, key=key):
                x = all_16bit_inputs(dtype)
                impl = torch_cast(dst, device)
                assert impl is not None
                to, cp = (word(check_cast(i, x, dst)) for i in (impl, copy_into(dst, device)))
                return {key: "as .to" if cp == to else cp}

            out.update(_isolated([key], copied, device=device))
        key = f"cast.{dst.name}.copy_from_f64.rounding"
        out.update(
            _isolated(
                [key], lambda dst=dst, key=key: {key: float64_rounding(copy_into(dst, device), dst)}, device=device
            )
        )
    return out


def _probe_checkpoints(device: str, torchao: bool) -> dict:
    """Which ways of keeping FP8 state (``keeping.KEEP``) give a float8 tensor of each dtype, and
    each of torchao's quantized subclasses, back whole: ``ok``, ``lost: <field>`` or the refusal."""
    from ..state.keeping import KEEP, PLAIN_ONLY, check_kept, subclass_examples, ways_for

    def words(t: torch.Tensor, name: str) -> dict:
        r = check_kept(t)
        return {
            f"checkpoint.{name}.{way}": r.refused.get(way) or (f"lost: {r.lost[way][0]}" if way in r.lost else "ok")
            for way in ways_for(t)
        }

    out: dict = {}
    for fmt in select(has_torch_dtype=True):
        if probes.torch_dtype_refusal(fmt) is None:
            codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(device)
            out.update(words(codes.view(fmt.torch_dtype()), fmt.name))
    if torchao and probes.torchao_float8_refusal() is None:
        ok, examples = attempt(lambda: subclass_examples(device))
        if not ok or isinstance(examples, str):
            return out | {"checkpoint.torchao": examples}
        for name, make in examples.items():
            keys = [f"checkpoint.torchao.{name}.{w}" for w in KEEP if w not in PLAIN_ONLY]
            out.update(_isolated(keys, lambda make=make, name=name: words(make(), f"torchao.{name}"), device=device))
    return out


def _probe_optimizer_state(device: str) -> dict:
    """torchao's FP8 optimizer state (``OptimStateFp8``, the state of ``AdamWFp8``): its default
    block size, and whether storing a float32 tensor in it gives fp8ref's codes and scales."""
    from ...reference.optim_state import quantize_state

    if probes.torchao_float8_refusal() is not None:
        return {}  # (the torchao key says why)
    key = "torchao.optim.fp8_state"

    def probe():
        from torchao.optim import AdamWFp8
        from torchao.optim.subclass_fp8 import OptimStateFp8

        gen = torch.Generator().manual_seed(0)
        x = torch.randn(8, 256, generator=gen) * torch.exp2(torch.randint(-20, 20, (8, 1), generator=gen).float())
        block = AdamWFp8([torch.nn.Parameter(torch.zeros(1))]).block_size
        state = OptimStateFp8.zeros(x.shape, block, device)
        state.copy_(x.to(device))
        codes, scale = quantize_state(x, block)
        same = torch.equal(state.codes.view(torch.uint8).cpu(), codes) and torch.equal(state.scale.cpu(), scale)
        return {
            key: f"block {block}, scale {str(state.scale.dtype).removeprefix('torch.')}, "
            + ("codes and scales as the reference" if same else "differs from the reference")
        }

    return _isolated([key], probe, device=device)


def _probe_autocast(device: str) -> dict:
    """Which dtype torchao's Float8Linear quantizes its input from under autocast, and which it
    returns (``autocast.autocast_answer``), per autocast dtype and recipe."""
    from ..ao.torchao_compat import torchao_float8_linear
    from ..state.autocast import autocast_answer

    if probes.torchao_float8_refusal() is not None:
        return {}
    out: dict = {}
    for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        for recipe in TORCHAO_RECIPES:
            key = f"torchao.autocast.{device_kind(device).split('-')[0]}.{tag}.{recipe}"

            def probe(recipe=recipe, dtype=dtype, key=key):
                return {key: autocast_answer(torchao_float8_linear(recipe), recipe, dtype, device)}

            out.update(_isolated([key], probe, device=device))
    return out


def _probe_scaled_mm(device: str) -> dict:
    """Which _scaled_mm configurations (and FP4 GEMMs through F.scaled_mm) this device accepts
    (``ok`` or the install's refusal);
    where tensorwise runs, the accumulator's mantissa bits within one K block and across blocks,
    with fast accumulation off and on, and what ``scale_result`` does to an FP8 output
    (``fp8ref.harness.gemm.gemm_probes``)."""
    from ..gemm import gemm_probes

    out = {
        f"scaled_mm.{scaling}.{tag}": probes.scaled_mm_refusal(scaling, dtype, device) or "ok"
        for scaling in probes.SCALED_MM_SCALINGS
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32"))
    }
    # FP4 through torch.nn.functional.scaled_mm, the API torch runs MXFP4 through on CUDA
    out |= {
        f"f_scaled_mm.{kind}.{tag}": probes.fp4_scaled_mm_refusal(kind, "F.scaled_mm", dtype, device) or "ok"
        for kind in ("mxfp4", "nvfp4")
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32"))
    }
    if out["scaled_mm.tensorwise.f32"] == "ok":
        for span in gemm_probes.SPANS:
            for tag, fast in (("exact", False), ("fast", True)):
                key = f"scaled_mm.accum_bits.{span}.{tag}"
                out.update(
                    _isolated(
                        [key],
                        lambda key=key, fast=fast, span=span: {key: gemm_probes.accumulator_bits(device, fast, span)},
                        device=device,
                    )
                )
        for scaling in ("tensorwise", "rowwise"):  # which backend ran: one line of a diff when it changes
            key = f"scaled_mm.kernels.{scaling}"
            if out.get(f"scaled_mm.{scaling}.bf16") == "ok":
                out.update(
                    _isolated(
                        [key], lambda key=key, s=scaling: {key: gemm_probes.scaled_mm_kernels(s, device)}, device=device
                    )
                )
        for tag, fast in (("exact", False), ("fast", True)):
            key = f"scaled_mm.promotion_interval.{tag}"
            out.update(
                _isolated(
                    [key], lambda key=key, fast=fast: {key: gemm_probes.promotion_interval(device, fast)}, device=device
                )
            )
        forms = [f"scaled_mm.form.{k}" for k in ("tensorwise.0d", "rowwise.Mx1_1xN", "shape.M")]
        out.update(
            _isolated(
                forms,
                lambda: {f"scaled_mm.form.{k}": v for k, v in gemm_probes.scale_forms_and_shapes(device).items()},
                device=device,
            )
        )
        for fmt in ("e4m3fn", "e5m2"):
            key = f"scaled_mm.scale_result.{fmt}_out"
            out.update(
                _isolated(
                    [key],
                    lambda key=key, fmt=fmt: {
                        key: gemm_probes.scale_result_rule(device, getattr(torch, f"float8_{fmt}"))
                    },
                    device=device,
                )
            )
    return out


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


def _probe_torchao(device: str) -> dict:
    missing = probes.torchao_float8_refusal()
    if missing is not None:
        return {"torchao": missing.split(":", 1)[0] if missing.startswith("missing") else missing}
    from ...reference.scaling import axiswise, tensorwise
    from ..ao import surface
    from ..ao import torchao_compat as ao

    out = surface.profile_keys()  # every config field's default, every enum's members
    for name in TORCHAO_RECIPES:
        out.update(
            _isolated(
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
            _isolated(
                [key],
                lambda g=g, pow2=pow2, key=key: {key: _sha(*ao.dynamic_cast(x, E4M3FN, g, pow2))},
                device=device,
            )
        )
    out.update(
        _isolated(
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
                _isolated(
                    [key],
                    lambda xs=xs, g=g, key=key: {key: _describe_cast(*ao.dynamic_cast(xs, E4M3FN, g, False))},
                    device=device,
                )
            )
    out.update(_probe_torchao_narrow(device))
    xe, we, ge = exact_linear_problem(device)
    with install.one_thread():
        for name in TORCHAO_RECIPES:
            key = f"torchao.digest.float8linear.{name}"
            out.update(
                _isolated(
                    [key],
                    lambda name=name, key=key: {key: _sha(*probes.run_torchao_linear(name, xe, we, ge))},
                    device=device,
                )
            )
    return out


def _probe_torchao_narrow(device: str) -> dict:
    """torchao's FP4/FP6 casts on every bfloat16 pattern (in-range mismatches against the codec;
    what NaN becomes, which no spec fixes), and digests of its MX FP4/FP6 and NVFP4 quantization
    of one fixed input (a change in rounding, nibble order or the two-level scale changes them)."""
    from ..ao import torchao_compat as ao

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

        out.update(_isolated([f"{key}.{k}" for k in ("in_range_mismatches", "inf", "nan_codes")], probe, device=device))
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(32, 128, generator=gen) * torch.exp2(torch.randint(-8, 8, (32, 1), generator=gen).float())).to(
        device
    )
    for elem in select(mx_element=True, narrow=True):
        for mode in ("floor", "rceil", "ceil", "even"):
            key = f"torchao.digest.mx.{elem.name}.{mode}"
            out.update(
                _isolated(
                    [key],
                    lambda elem=elem, mode=mode, key=key: {key: _sha(*ao.to_mx(x, elem, 32, mode))},
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

        out.update(_isolated([key], special_probe, device=device))
    for d in deviations.MX_SCALE_DEVIATIONS:
        key = f"torchao.mx.{d.mode}.deviation.{d.key}"
        out.update(_isolated([key], lambda d=d, key=key: {key: _mx_deviation(d, device)}, device=device))
    key = "torchao.mx.partial_block"  # a row ending inside a block: the reference refuses it
    out.update(_isolated([key], lambda: {key: _partial_mx_block(device)}, device=device))
    for level in ("single", "two"):
        key = f"torchao.digest.nvfp4.{level}"

        def nvfp4_probe(level=level, key=key):
            g = ao.nvfp4_per_tensor_scale(x.abs().amax()) if level == "two" else None
            return {key: _sha(*ao.nvfp4_quantize(x, g))}

        out.update(_isolated([key], nvfp4_probe, device=device))
    key = "torchao.nvfp4.single.division"
    out.update(_isolated([key], lambda: {key: _nvfp4_division(device)}, device=device))
    return out


def _nvfp4_division(device: str) -> str:
    """A block whose scale is 3.75 (amax 22.5) holding 18.75: x / s = 5 is an E2M1 tie (to 4),
    x * float32(1 / s) is above it (to 6). Which of fp8ref's two arithmetics torchao follows."""
    from ...reference import nvfp4
    from ..ao import torchao_compat as ao

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
    from ..ao import torchao_compat as ao

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
    from ..ao import torchao_compat as ao

    scale, data = ao.to_mx(torch.ones(2, 48, device=device), E4M3FN, 32, "floor")
    return f"accepted: scales {tuple(scale.shape)}, data {tuple(data.shape)}"


def _probe_emulated_mlp() -> dict:
    """The MLP of ``fp8ref.harness.gemm.mlp_problem`` trained with fp8ref's emulated FP8 (tensorwise):
    the loss at a few steps, rounded; what moves it is torch's matmul and optimizer, not torch's FP8 casts (compared
    within ``TOLERANCES``)."""
    from ..gemm.mlp_problem import train_mlp

    steps = (0, 50, 100, 200, 299)
    keys = [f"emulated_mlp.loss.step{s:03d}" for s in steps]

    def probe():
        with install.one_thread():
            losses = train_mlp(True, steps=300)
        return {k: round(losses[s], 4) for k, s in zip(keys, steps)}

    return _isolated(keys, probe)


def _probe_special_casts(device: str) -> dict:
    """A few named inputs whose treatment varies: -0.0 in each format, E8M0's tie and zero."""
    out = {}
    for fmt in select(has_torch_dtype=True):
        impl = torch_cast(fmt, device)
        if impl is None:
            continue
        key = f"cast.{fmt.name}.f32.neg_zero"
        out.update(
            _isolated(
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
                _isolated([key], lambda impl=impl, d=d, key=key: {key: deviations.observe(impl, d)}, device=device)
            )
    impl = torch_cast(E8M0FNU, device)
    if impl is not None:
        ties = torch.tensor([1.5, 0.75, 3 * 2.0**-128, 0.0], dtype=torch.float32)
        key = "cast.e8m0fnu.f32.ties_and_zero"
        out.update(_isolated([key], lambda: {key: " ".join(f"0x{int(c):02x}" for c in impl.cast(ties))}, device=device))
    return out


def _probe_native_ops(device: str) -> dict:
    """Which of torch's catalogued ops run on each float8 dtype (``native_ops.support_matrix``:
    ``native.<op>`` for each op that runs on one at least), what each way of writing a value into float8 does with it
    (``native.written.<format>.<path>``: as ``.to`` or not, what it refuses), and whether the
    install still gives each named native-op deviation (``native.deviation.<key>``: where it
    deviates, or ``definition``)."""
    from ..casts.deviations import NATIVE_OP_DEVIATIONS
    from ..native import native_ops
    from ..native.native_checks import check_op, check_written

    refusal = native_ops.catalogue_refusal()
    if refusal is not None:
        return {"native": refusal}
    matrix = native_ops.support_matrix(device)
    # the ops that run on some float8 dtype: one refused everywhere has no key, so a kernel a release
    # adds is a key that appears, and the catalogue's own churn (ops it adds or drops) is no line
    out = {
        f"native.{name}": native_ops.matrix_word(row)
        for name, row in matrix.items()
        if any(word in ("runs", "partial") for word in row.values())
    }
    formats = {f.name: f for f in probes.float8_formats()}
    for fmt in formats.values():  # values written from Python scalars and other dtypes
        out.update({f"native.written.{fmt.name}.{how}": word for how, word in check_written(fmt, device).items()})
    for dev in NATIVE_OP_DEVIATIONS:
        runs = [f for f in dev.formats if f in formats and matrix.get(dev.op, {}).get(f) in ("runs", "partial")]
        where = [f for f in runs if check_op(dev.op, formats[f], device).excused.get(dev.key)]
        word = f"deviates on {' '.join(where)}" if where else ("definition" if runs else "refused")
        out[f"native.deviation.{dev.key}"] = word
    return out


def _probe_scalar_ops(device: str) -> dict:
    """Python scalars in float8 arithmetic and comparisons (``native.scalar.<op>``, over the float8
    dtypes): refused, or whether the scalar takes part exactly or rounded into the dtype first
    (``scalar_ops``; an answer that is neither reads ``differs``)."""
    from ..native.native_ops import matrix_word
    from ..native.scalar_ops import SCALAR_OPS, check_scalar_op, word

    formats = probes.float8_formats()
    return {
        f"native.scalar.{name}": matrix_word({f.name: word(check_scalar_op(name, f, device)) for f in formats})
        for name in SCALAR_OPS
    }


def _probe_transformers_fp8() -> dict:
    """transformers' fine-grained FP8 against the block reference (``hf.block_checks``): each path's
    word (``definition``, ``deviates: <named deviations>``, ``differs``), which weights the
    quantizer passes through, which the loader refuses, and a tiny checkpoint through
    ``from_pretrained``. Device-independent: collected for the CPU profile only."""
    from ..hf import block_checks
    from ..hf.transformers_fp8 import finegrained_refusal

    missing = finegrained_refusal()
    if missing is not None:
        return {"transformers.fp8": missing.split(":", 1)[0] if missing.startswith("missing") else missing}
    out = {"transformers.fp8.quantize.passes": "; ".join(f"{k}: {v}" for k, v in block_checks.passes_through().items())}
    for fmt in ("float", "ue8m0"):
        out[f"transformers.fp8.quantize.{fmt}"] = block_checks.word(block_checks.check_quantize(fmt))
        for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            loader = block_checks.check_loader(dtype, fmt)
            out[f"transformers.fp8.loader.{fmt}.{tag}"] = block_checks.word(loader)
            out[f"transformers.fp8.backward.{fmt}.{tag}"] = block_checks.word(block_checks.check_backward(dtype, fmt))
        out[f"transformers.fp8.loader.{fmt}.576x256"] = loader.observed.get("576x256", "")
    if install.has_package("accelerate"):
        # (building the model imports transformers' quantizers, which import an installed torchao:
        # a torchao that does not import is the install's answer for these keys, not a crash)
        keys = [f"transformers.fp8.from_pretrained.{fmt}" for fmt in ("float", "ue8m0")]
        out.update(_isolated(keys, functools.partial(_from_pretrained, keys)))
    else:
        out["transformers.fp8.from_pretrained"] = "missing: accelerate"
    return out


def _from_pretrained(keys: list[str]) -> dict:
    """A tiny Qwen3 FP8 block checkpoint written by fp8ref in each scale format and loaded by
    ``from_pretrained``: each load's word (``block_checks.word``)."""
    import tempfile

    from ..hf import block_checkpoint, block_checks

    config, state = block_checkpoint.tiny_qwen3()  # (one model, written in each scale format)
    out = {}
    for key in keys:
        with tempfile.TemporaryDirectory() as folder:
            quantized = block_checkpoint.write(folder, config, state, key.rsplit(".", 1)[1])
            loaded = block_checkpoint.load(folder).state_dict()
        out[key] = block_checks.word(block_checkpoint.check_load(loaded, quantized))
    return out


def _probe_grouped(device: str, torchao: bool) -> dict:
    """Which mixture-of-experts grouped GEMMs run here, forward and backward (``gemm.grouped``)."""
    from ..gemm import grouped

    return grouped.outcomes(device, torchao=torchao and probes.torchao_float8_refusal() is None)


def _probe_surface(device: str) -> dict:
    """The FP8 API surface (``surface.collect``): type promotion of each float8 dtype, Python
    scalars with it, ``a + b`` with every other dtype, the scaled GEMM ops' schemas and enums."""
    from ..native import surface

    return surface.collect(device)


def collect(device: str = "cpu", torchao: bool = True) -> dict:
    """Run every probe on ``device``; returns the profile dict. An operation the install refuses
    is recorded as ``refused: ...`` under the keys of that probe; every other key is still
    collected."""
    device_kind(device)  # validates
    behaviour: dict = {}
    behaviour.update(_probe_finfo())
    behaviour.update(_probe_casts(device))
    behaviour.update(_probe_float8_conversions(device))
    behaviour.update(_probe_checkpoints(device, torchao))
    behaviour.update(_probe_scaled_mm(device))
    behaviour.update(_probe_special_casts(device))
    behaviour.update(_probe_native_ops(device))
    behaviour.update(_probe_scalar_ops(device))
    behaviour.update(_probe_grouped(device, torchao))
    behaviour.update(_probe_surface(device))
    if torchao:
        behaviour.update(_probe_torchao(device))
        behaviour.update(_probe_autocast(device))
        behaviour.update(_probe_optimizer_state(device))
    if device_kind(device) == "cpu":
        behaviour.update(_probe_transformers_fp8())
    behaviour.update(_probe_emulated_mlp())
    return {
        "fp8ref_profile": PROFILE_VERSION,
        "versions": versions(device),
        "behaviour": dict(sorted(behaviour.items())),
    }
