"""The behaviour profile's file format: write, read (with clear errors for what is not a
profile), and compare two profiles key by key. No torch: ``python -m fp8ref diff`` and scripts
comparing two installs' profiles start in a fraction of a second. ``fp8ref.harness.profiles.profile`` collects
profiles and re-exports these names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .atomic import write_text
from .stack_identity import (
    LABEL_STACK,
    install_label,
    label_matches,
    label_packages,
    not_installed_here,
    versions_words,
)

__all__ = [
    "PROFILE_VERSION",
    "TOLERANCES",
    "MACHINE_FACTS",
    "machine_dependent",
    "ProfileError",
    "save",
    "load",
    "who",
    "same_value",
    "diff",
    "not_compared",
    "diff_line",
    "first_divergence",
    "format_diff",
    "ACCEPTED_SUFFIX",
    "accepted_differences_file",
    "install_label",
    "read_accepted",
    "read_accepted_file",
    "write_accepted_file",
]

PROFILE_VERSION = 1

# Keys whose value is a measured number that depends on floating-point summation order (the
# CPU's GEMM kernels, AMX or AVX2), not on FP8 behaviour: equal when within this relative
# tolerance. Measured: the emulated MLP's step-299 loss moved 0.4% between two x86 CPUs with
# the same torch; a change in torch's matmul, AdamW or autograd semantics moves it by far more.
TOLERANCES = {"emulated_mlp.loss.": 0.02}

# Keys whose value is a fact of the machine as well as of the install: on CPU profiles, compared
# only between machines that agree on the ``versions`` field named. Which kernel torch's CPU
# _scaled_mm runs follows whether torch finds AMX usable (``install.cpu_amx``): two x86 machines
# with the same /proc/cpuinfo flags were seen to differ there; so does which float8 dtypes the
# scaled GEMM takes at all (``native.torch._scaled_mm*``: oneDNN's FP8 matmul with AMX, a float32
# matmul of the decoded operands without). A refusal or a missing key is compared as ever.
# The workloads' traces (``workload.``) hold float8 codes computed from the CPU's GEMMs' outputs
# (their second layer's inputs, their second step's weights): measured the same on 1 and 2 threads
# without AMX; with AMX, torch's _scaled_mm runs another kernel, so they are compared only between
# machines that agree on it.
MACHINE_FACTS = {"scaled_mm.kernels.": "cpu_amx", "native.torch._scaled_mm": "cpu_amx", "workload.": "cpu_amx"}


def save(profile: dict, path: str | Path) -> None:
    """Write a profile as JSON, whole or not at all (``fp8ref.harness.profiles.atomic``)."""
    write_text(path, json.dumps(profile, indent=1, sort_keys=True) + "\n")


class ProfileError(ValueError):
    """A file that cannot be read as a profile of this fp8ref (missing, not JSON, not a profile,
    or written by a newer profile format). The message names the file and what is wrong."""


def load(path: str | Path) -> dict:
    """Read a profile; ``ProfileError`` (a ValueError) when ``path`` is not one this fp8ref reads."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not a text file ({exc.reason})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); truncated or corrupted?"
        ) from exc
    version = data.get("fp8ref_profile") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > PROFILE_VERSION:
        raise ProfileError(
            f"{path}: written by a newer fp8ref (profile format {version}; this fp8ref reads "
            f"format {PROFILE_VERSION}); upgrade fp8ref to read it"
        )
    if version != PROFILE_VERSION or not isinstance(data.get("behaviour"), dict):
        raise ProfileError(
            f"{path}: not an fp8ref profile (expected a JSON object with fp8ref_profile = "
            f"{PROFILE_VERSION} and a behaviour mapping)"
        )
    versions = data.get("versions")
    if not isinstance(versions, dict) or not isinstance(versions.get("torch"), str):
        raise ProfileError(f"{path}: its 'versions' must be an object naming at least torch's version (a string)")
    bad = sorted(k for k, v in versions.items() if not isinstance(k, str) or not isinstance(v, (str, type(None))))
    if bad:
        raise ProfileError(f"{path}: versions {', '.join(map(str, bad))}: expected a version string or null")
    if not versions.get("device"):
        raise ProfileError(
            f"{path}: versions device: expected the device kind it was collected on ('cpu', 'cuda-sm90', ...), "
            "got nothing"
        )
    return data


def who(p: dict, other: dict | None = None) -> str:
    """The install a profile was collected on: ``torch X, torchao Y``, and with ``other`` every
    package whose version differs from ``other``'s (``stack_identity.versions_words``)."""
    return versions_words(p, other)


_MISSING = "<absent>"


def same_value(key: str, a: Any, b: Any) -> bool:
    """Equal (of the same kind: ``false`` is not ``0``), or for a key under ``TOLERANCES`` two
    numbers within its relative tolerance."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if a == b:
        return True
    tol = next((t for prefix, t in TOLERANCES.items() if key.startswith(prefix)), None)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return tol is not None and numbers and abs(a - b) <= tol * max(abs(a), abs(b))


def machine_dependent(key: str, pinned: dict, now: dict) -> str | None:
    """The machine fact (``MACHINE_FACTS``) on which two CPU profiles' answers for ``key`` may
    legitimately differ, as ``field: A -> B``; None when the key is to be compared."""
    field = next((f for prefix, f in MACHINE_FACTS.items() if key.startswith(prefix)), None)
    va, vb = pinned.get("versions", {}), now.get("versions", {})
    if field is None or va.get("device") != "cpu" or vb.get("device") != "cpu":
        return None
    fa, fb = va.get(field), vb.get(field)
    if fa is None or fb is None or fa == fb:
        return None
    values = pinned.get("behaviour", {}).get(key), now.get("behaviour", {}).get(key)
    if not all(isinstance(v, str) and not v.startswith(("refused", "missing")) for v in values):
        return None
    return f"{field}: {fa} -> {fb}"


def diff(pinned: dict, now: dict) -> list[tuple[str, object, object]]:
    """(key, pinned value, current value) for every behaviour key that differs; left out: the keys
    that depend on a machine fact the two profiles disagree on (``machine_dependent``) and those of
    a package not usable on one side (``not_compared``)."""
    a, b = pinned.get("behaviour", {}), now.get("behaviour", {})
    rows = [(k, a.get(k, _MISSING), b.get(k, _MISSING)) for k in sorted(set(a) | set(b))]
    return [
        (k, x, y)
        for k, x, y in rows
        if not same_value(k, x, y)
        and machine_dependent(k, pinned, now) is None
        and not_installed_here(k, pinned, now) is None
    ]


def not_compared(pinned: dict, now: dict) -> dict[str, list[str]]:
    """The keys left out of ``diff`` because a package of theirs is not usable on one side: why
    (``transformers not installed in B``) -> the keys that differ or exist on one side only."""
    a, b = pinned.get("behaviour", {}), now.get("behaviour", {})
    out: dict[str, list[str]] = {}
    for k in sorted(set(a) | set(b)):
        why = not_installed_here(k, pinned, now)
        if why is not None and not same_value(k, a.get(k, _MISSING), b.get(k, _MISSING)):
            out.setdefault(why, []).append(k)
    return out


def first_divergence(key: str, pinned: dict, now: dict) -> str | None:
    """Where the traced program behind ``key`` first parts between the two profiles (both keep
    its ``traces``: ``fp8ref.harness.trace.divergence``); None when either has no trace of it or
    they do not part. A trace that cannot be read is named, never taken for a divergence."""
    from ..trace.divergence import first_divergence as first

    a, b = (p.get("traces", {}).get(key) if isinstance(p.get("traces"), dict) else None for p in (pinned, now))
    if not (isinstance(a, list) and isinstance(b, list)):
        return None
    try:
        return first(a, b)
    except ValueError as exc:
        return f"cannot compare the traces: {exc}"


def diff_line(key: str, old: object, new: object, pinned: dict, now: dict) -> str:
    """``key: pinned X (versions) -> now Y (versions)``, each side naming torch, torchao, the
    packages the key belongs to and every package whose version differs between the two; a key
    with traces on both sides ends with where they first part (``first_divergence``)."""
    from .stack_identity import packages_of

    always = ("torch", "torchao", *packages_of(key))
    where = first_divergence(key, pinned, now)
    return (
        f"{key}: pinned {old!r} ({versions_words(pinned, now, always)}) -> now {new!r} "
        f"({versions_words(now, pinned, always)})" + (f"; first divergence: {where}" if where else "")
    )


# beside each golden NAME.json: NAME-installs.json, the differences other installs are known to
# show (or a team has accepted), per install, each with why
ACCEPTED_SUFFIX = "-installs.json"


def accepted_differences_file(golden_file: str | Path) -> Path:
    """``NAME-installs.json`` beside the golden ``NAME.json``."""
    path = Path(golden_file)
    return path.with_name(path.stem + ACCEPTED_SUFFIX)


def read_accepted_file(path: str | Path) -> dict:
    """An accepted-differences file whole (install label -> entry); ``ProfileError`` when it cannot
    be read or is not a JSON object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a JSON object of installs ('torch X, torchao Y' -> entry)")
    return data


def write_accepted_file(path: str | Path, named: dict) -> bool:
    """Write an accepted-differences file whole (install label -> entry), or remove it when it
    names no install (as before the first accept); whether a file is left."""
    path = Path(path)
    if named:
        write_text(path, json.dumps(named, indent=1, sort_keys=True) + "\n")
        return True
    path.unlink(missing_ok=True)
    return False


def read_accepted(path: str | Path, now: dict) -> tuple[dict, str] | None:
    """The differences the accepted-differences file ``path`` names for ``now``'s install (key ->
    value) and why; None when there is no such file or it does not name the install;
    ``ProfileError`` when it cannot be read or its entry is malformed."""
    path = Path(path)
    if not path.exists():
        return None
    label = entry_label(read_accepted_file(path), now)
    if label is None:
        return None
    entry = read_accepted_file(path)[label]
    if not isinstance(entry, dict) or not isinstance(entry.get("differences"), dict) or not entry.get("why"):
        raise ProfileError(f"{path}: the entry for {label} needs 'why' and a 'differences' object")
    return entry["differences"], entry["why"]


def entry_label(named: dict, now: dict) -> str | None:
    """The label of ``named`` (an accepted-differences file's entries) that names ``now``'s install:
    the one naming the most packages of those whose every package matches (``label_matches``)."""
    matching = [label for label in named if label_matches(label, now)]
    return max(matching, key=lambda label: len(set(label_packages(label)) & set(LABEL_STACK)), default=None)


def format_diff(pinned: dict, now: dict) -> list[str]:
    """One line per differing key (``diff_line``)."""
    return [diff_line(k, va, vb, pinned, now) for k, va, vb in diff(pinned, now)]
