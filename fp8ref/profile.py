"""The behaviour profile of an install: what it does where correct installs may differ.

A profile is JSON: ``versions`` (what produced it) and ``behaviour``, a flat, sorted mapping of
dotted keys to plain values, so a difference reads as one line per key. This module is a thin list
of probes: each asks the module that knows the behaviour (``conformance`` for casts,
``torchao_compat`` for torchao's recipe table and casts, ``emulate`` for the MLP) and writes down
the answer. Invariants are asserted elsewhere; the profile holds what legitimately varies.

Probes that depend on floating-point summation order (digests of GEMM outputs, the MLP loss
curve) run with one intra-op thread so the answer does not depend on the machine's core count.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import platform
from pathlib import Path

import torch

from .conformance import all_16bit_inputs, check_cast, torch_cast
from .formats import FORMATS

__all__ = ["PROFILE_VERSION", "device_kind", "versions", "collect", "save", "load", "diff", "format_diff",
           "golden_path", "compare_with_golden"]

PROFILE_VERSION = 1
TORCHAO_RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")


def device_kind(device: str = "cpu") -> str:
    """``cpu`` or ``cuda-smXY``: the key a golden profile is pinned under."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return "cpu"
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        return f"cuda-sm{major}{minor}"
    raise ValueError(f"device: expected 'cpu' or 'cuda[:N]', got {device!r}")


def package_version(pkg: str) -> "str | None":
    try:
        return importlib.import_module(pkg).__version__
    except Exception:  # noqa: BLE001 - absent or broken: recorded as None
        return None


def versions(device: str = "cpu") -> dict:
    dev = torch.device(device)
    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchao": package_version("torchao"),
        "ml_dtypes": package_version("ml_dtypes"),
        "cuda": torch.version.cuda,
        "device": device_kind(device),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.machine(),
    }
    return out


@contextlib.contextmanager
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _sha(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().reshape(-1).contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


# --- probes ---------------------------------------------------------------------------------
def _probe_finfo() -> dict:
    out = {}
    for fmt in FORMATS.values():
        dtype = fmt.torch_dtype()
        if dtype is None:
            out[f"finfo.{fmt.name}"] = "missing"
            continue
        fi = torch.finfo(dtype)
        for field in ("max", "tiny", "eps"):
            out[f"finfo.{fmt.name}.{field}"] = float(getattr(fi, field))
    return out


def _probe_casts(device: str) -> dict:
    out = {}
    for fmt in FORMATS.values():
        impl = torch_cast(fmt, device)
        if impl is None:
            out[f"cast.{fmt.name}"] = "missing"
            continue
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            r = check_cast(impl, all_16bit_inputs(dtype), fmt, tag)
            key = f"cast.{fmt.name}.{tag}"
            out[f"{key}.in_range_mismatches"] = r.in_range_mismatches
            out[f"{key}.overflow"] = r.overflow_mode
            out[f"{key}.inf"] = r.inf_mode
            out[f"{key}.nan_codes"] = "|".join(r.nan_codes)
            if r.no_encoding != "n/a":
                out[f"{key}.no_encoding"] = r.no_encoding
    return out


def _probe_scaled_mm(device: str) -> dict:
    """Which _scaled_mm configurations this device accepts (and the class of error if not)."""
    out = {}
    gen = torch.Generator().manual_seed(0)
    M, K, N = 32, 64, 48
    a = (torch.randn(M, K, generator=gen)).to(torch.float8_e4m3fn).to(device)
    b = (torch.randn(N, K, generator=gen)).to(torch.float8_e4m3fn).to(device).t()
    scales = {
        "tensorwise": (torch.tensor(1.0, device=device), torch.tensor(1.0, device=device)),
        "rowwise": (torch.ones(M, 1, device=device), torch.ones(1, N, device=device)),
    }
    for gran, (sa, sb) in scales.items():
        for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
            key = f"scaled_mm.{gran}.{tag}"
            try:
                torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=dtype)
                out[key] = "ok"
            except Exception as exc:  # noqa: BLE001 - the class of error is the observation
                out[key] = f"error: {type(exc).__name__}"
    return out


def _probe_torchao(device: str) -> dict:
    try:
        from . import torchao_compat as ao

        ao.require_torchao()
    except ImportError:
        return {"torchao": "missing"}
    import dataclasses

    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    from .scaling import axiswise, tensorwise

    out = {}
    for name in TORCHAO_RECIPES:
        for k, v in ao.recipe_table(name).items():
            out[f"torchao.recipe.{name}.{k}"] = v
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 128, generator=gen) * 3).to(torch.bfloat16).to(device)
    for tag, g, pow2 in (("tensorwise", tensorwise(), False), ("rowwise", axiswise(-1), True)):
        codes, scale = ao.dynamic_cast(x, "e4m3fn", g, pow2)
        out[f"torchao.digest.cast.{tag}"] = _sha(codes, scale)
    with _one_thread():
        for name in TORCHAO_RECIPES:
            torch.manual_seed(0)
            lin = torch.nn.Sequential(torch.nn.Linear(128, 64)).to(torch.bfloat16).to(device)
            cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name(name), emulate=False)
            m = convert_to_float8_training(lin, config=cfg)
            xi = x.clone().requires_grad_()
            y = m(xi)
            y.float().square().mean().backward()
            out[f"torchao.digest.float8linear.{name}"] = _sha(y, xi.grad, m[0].weight.grad)
    return out


def _probe_emulated_mlp() -> dict:
    """The seed's MLP trained with fp8ref's emulated FP8 (tensorwise): the loss at a few steps,
    rounded; what moves it is torch's matmul and optimizer, not torch's FP8 casts."""
    from .emulate import train_seed_mlp

    with _one_thread():
        losses = train_seed_mlp(True, steps=300)
    return {f"emulated_mlp.loss.step{s:03d}": round(losses[s], 4) for s in (0, 50, 100, 200, 299)}


def _probe_special_casts(device: str) -> dict:
    """A few named inputs whose treatment varies: -0.0 in each format, E8M0's tie and zero."""
    out = {}
    for fmt in FORMATS.values():
        impl = torch_cast(fmt, device)
        if impl is None:
            continue
        out[f"cast.{fmt.name}.f32.neg_zero"] = f"0x{int(impl.cast(torch.tensor([-0.0]))[0]):02x}"
    impl = torch_cast("e8m0fnu", device)
    if impl is not None:
        ties = torch.tensor([1.5, 0.75, 3 * 2.0**-128, 0.0], dtype=torch.float32)
        out["cast.e8m0fnu.f32.ties_and_zero"] = " ".join(f"0x{int(c):02x}" for c in impl.cast(ties))
    return out


def collect(device: str = "cpu", torchao: bool = True) -> dict:
    """Run every probe on ``device``; returns the profile dict."""
    device_kind(device)  # validates
    behaviour: dict = {}
    behaviour.update(_probe_finfo())
    behaviour.update(_probe_casts(device))
    behaviour.update(_probe_scaled_mm(device))
    behaviour.update(_probe_special_casts(device))
    if torchao:
        behaviour.update(_probe_torchao(device))
    behaviour.update(_probe_emulated_mlp())
    return {"fp8ref_profile": PROFILE_VERSION, "versions": versions(device),
            "behaviour": dict(sorted(behaviour.items()))}


def save(profile: dict, path: "str | Path") -> None:
    Path(path).write_text(json.dumps(profile, indent=1, sort_keys=True) + "\n")


def load(path: "str | Path") -> dict:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("fp8ref_profile") != PROFILE_VERSION:
        raise ValueError(f"path: {path} is not an fp8ref profile (version {PROFILE_VERSION})")
    return data


def _who(p: dict) -> str:
    v = p.get("versions", {})
    return f"torch {v.get('torch')}, torchao {v.get('torchao')}"


_MISSING = "<absent>"


def diff(pinned: dict, now: dict) -> list[tuple[str, object, object]]:
    """(key, pinned value, current value) for every behaviour key that differs."""
    a, b = pinned.get("behaviour", {}), now.get("behaviour", {})
    return [(k, a.get(k, _MISSING), b.get(k, _MISSING)) for k in sorted(set(a) | set(b)) if a.get(k, _MISSING) != b.get(k, _MISSING)]


def format_diff(pinned: dict, now: dict) -> list[str]:
    """One line per differing key: ``key: pinned X (versions) -> now Y (versions)``."""
    return [f"{k}: pinned {va!r} ({_who(pinned)}) -> now {vb!r} ({_who(now)})" for k, va, vb in diff(pinned, now)]


def golden_path(golden_dir: "str | Path", device: str = "cpu") -> Path:
    return Path(golden_dir) / f"{device_kind(device)}.json"


def compare_with_golden(golden_dir: "str | Path", device: str = "cpu", update: bool = False) -> tuple[str, list[str]]:
    """Collect this install's profile and hold it against the pinned one for the device kind.

    Returns (status, lines): ``("equal", [])``, ``("differs", one line per key)``,
    ``("missing", [how to pin])`` or, with ``update``, ``("updated", [what was written])``.
    """
    path = golden_path(golden_dir, device)
    now = collect(device)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        save(now, path)
        return "updated", [f"re-pinned {path} on {_who(now)}; commit it and say why in the message"]
    if not path.exists():
        return "missing", [f"no golden profile for device kind {device_kind(device)!r} ({path}); pin one with "
                           f"`pytest --fp8-update-golden` (or `python -m fp8ref profile --device {device} --out {path}`)"]
    lines = format_diff(load(path), now)
    return ("differs" if lines else "equal"), lines
