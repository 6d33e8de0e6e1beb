"""The install under test: what it is (Python, torch, torchao, ml_dtypes, CUDA, device, CPU
features) and which optional packages it has. What it can *do* is asked in ``probes``."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import platform
import re
from pathlib import Path
from typing import Any

import torch

from ...reference.validate import one_of
from .refusals import DOES_NOT_IMPORT, describe

__all__ = [
    "EXTRAS",
    "MissingPackage",
    "has_package",
    "needs_package",
    "require",
    "package_version",
    "versions",
    "versions_line",
    "device_kind",
    "cpu_features",
    "cpu_amx",
    "one_thread",
]

# CPU features that decide torch's CPU _scaled_mm backend: with AMX, torch calls oneDNN's FP8
# matmul, which without a JIT kernel for the CPU runs oneDNN's reference implementation (about
# 700x slower than a bfloat16 matmul, measured on a Xeon with AMX-BF16/INT8 but no AMX-FP16);
# without, it dequantizes and multiplies in float32.
_CPU_FLAGS = ("avx512_fp16", "avx512_bf16", "amx_bf16", "amx_int8", "amx_fp16")


_PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def _optional_requirements() -> list[str]:
    """fp8ref's requirements as ``name>=x; extra == "e"`` lines: from its installed metadata, or
    from pyproject.toml in a checkout that was not installed."""
    try:
        return importlib.metadata.requires("fp8ref") or []
    except importlib.metadata.PackageNotFoundError:
        import tomllib  # Python 3.11+; on 3.10 fp8ref must be installed (pip install -e .)

        extras = tomllib.loads(_PYPROJECT.read_text())["project"]["optional-dependencies"]
        return [f'{req}; extra == "{extra}"' for extra, reqs in extras.items() for req in reqs]


def _extras() -> dict[str, tuple[str, str]]:
    """Optional packages by import name -> (pip name, the extra that installs them). The one list
    is pyproject.toml's optional-dependencies; an import name is the pip name with '_' for '-'."""
    out: dict[str, tuple[str, str]] = {}
    for req in _optional_requirements():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;.*\bextra\s*==\s*[\"']([^\"']+)[\"']", req)
        if m and m.group(1).lower() != "fp8ref":  # (the gpu extra names the finetune one)
            out.setdefault(m.group(1).lower().replace("-", "_"), (m.group(1), m.group(2)))
    return out


_EXTRAS = _extras()
# optional package (import name) -> the extra of pyproject.toml that installs it
EXTRAS = {pkg: extra for pkg, (_, extra) in _EXTRAS.items()}


class MissingPackage(ImportError):
    """An optional package is not installed; the message names it and the extra that brings it."""


def has_package(pkg: str) -> bool:
    """Is ``pkg`` installed? (Found, not imported: a package that is installed but refuses to
    import with this torch is the install's answer, reported by the capability probes.)"""
    return importlib.util.find_spec(pkg) is not None


def needs_package(pkg: str, what: str = "this") -> str:
    """The one wording for a missing optional package: what needs it and how to install it."""
    one_of(pkg, sorted(EXTRAS), "pkg")
    return f"{what} needs package {_EXTRAS[pkg][0]}, which is not installed (pip install -e '.[{EXTRAS[pkg]}]')"


def require(pkg: str, what: str = "this") -> Any:
    """Import and return optional package ``pkg``, or raise ``MissingPackage`` saying so."""
    if not has_package(pkg):
        raise MissingPackage(needs_package(pkg, what))
    return importlib.import_module(pkg)


def package_version(pkg: str) -> str | None:
    """``pkg.__version__``, or None when it is absent or fails to import."""
    if importlib.util.find_spec(pkg) is None:
        return None
    try:
        return importlib.import_module(pkg).__version__
    except Exception:  # noqa: BLE001 - installed but unimportable: reported by probes.torchao_float8_refusal()
        return None


def device_kind(device: str = "cpu") -> str:
    """``cpu`` or ``cuda-smXY``: the key a golden profile is pinned under. A ValueError names what
    is wrong with ``device``: not cpu or cuda[:N], no CUDA here, or no such CUDA device."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: expected 'cpu' or 'cuda[:N]', got {device!r}") from exc
    if dev.type == "cpu":
        return "cpu"
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device}: CUDA is not available here (torch {torch.__version__}, "
                f"CUDA build {torch.version.cuda or 'none'})"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        major, minor = torch.cuda.get_device_capability(dev)
        return f"cuda-sm{major}{minor}"
    raise ValueError(f"device: expected 'cpu' or 'cuda[:N]', got {device!r}")


@functools.lru_cache(maxsize=1)
def cpu_features() -> str:
    """The CPU flags (of ``_CPU_FLAGS``) this machine has, space-separated; '' when none or unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(x for x in _CPU_FLAGS if x in have)
    except OSError:
        pass
    return ""


def cpu_amx() -> str:
    """``yes`` when torch itself finds AMX tiles usable here (its cpuinfo, with the kernel's
    permission), ``no`` when not, ``unknown`` when this torch cannot say. It decides torch's CPU
    tensorwise ``_scaled_mm``: oneDNN's FP8 matmul with AMX-INT8, a float32 matmul of the decoded
    operands without (aten/src/ATen/native/Blas.cpp, torch 2.9-2.15). /proc/cpuinfo's flags
    (``cpu_features``) can name AMX on a machine whose kernel or hypervisor withholds it."""
    usable = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if usable is None:
        return "unknown"
    try:
        return "yes" if usable() else "no"
    except RuntimeError:
        return "unknown"


# the packages whose behaviour a profile pins besides torch (``profiles.stack_identity.STACK``), by
# distribution name: their installed versions, read from package metadata, and whether each imports
# (``pinned_version``: one that does not is named in the versions, not blamed on its neighbours)
PINNED_PACKAGES = {
    "torchao": "torchao",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "safetensors": "safetensors",
    "triton": "triton",
    "ml_dtypes": "ml-dtypes",
    "gfloat": "gfloat",
    "expecttest": "expecttest",
}


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def import_failure(name: str) -> str | None:
    """Why the installed package ``name`` fails to import here (``Type: message``), or None when it
    imports. Asked once per process: a package built for another torch fails the same way each time."""
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - whatever it raises while it loads is the package not importing
        return describe(exc)
    return None


def pinned_version(name: str) -> str | None:
    """A pinned package's version (``PINNED_PACKAGES``), None when it is not installed, and
    ``<version> installed, does not import: <its error>`` when it is installed but fails to
    import: its keys are then left uncompared, the package named, never its neighbours blamed."""
    version = installed_version(PINNED_PACKAGES[name])
    if version is None:
        return None
    failure = import_failure(name)
    return version if failure is None else f"{version} {DOES_NOT_IMPORT}: {failure}"


def versions(device: str = "cpu") -> dict:
    """What produced a result: Python, torch and every package whose behaviour the profile pins
    (``PINNED_PACKAGES``: None when not installed, its import error when it does not import:
    ``pinned_version``), CUDA, device kind and name, CPU features."""
    dev = torch.device(device)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        **{name: pinned_version(name) for name in PINNED_PACKAGES},
        "cuda": torch.version.cuda,
        "device": device_kind(device),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.machine(),
        "cpu_features": cpu_features(),
        "cpu_amx": cpu_amx(),
    }


@contextlib.contextmanager
def one_thread():
    """torch with one intra-op thread inside the block: a summation order that does not depend
    on the machine's core count."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def versions_line() -> str:
    """``torch X, torchao Y`` for messages (torchao 'not installed' or 'unimportable')."""
    if importlib.util.find_spec("torchao") is None:
        ao = "not installed"
    else:
        ao = package_version("torchao") or "unimportable"
    return f"torch {torch.__version__}, torchao {ao}"
