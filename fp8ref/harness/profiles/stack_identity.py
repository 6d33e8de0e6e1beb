"""Which install a profile describes, and which package each of its keys belongs to (no torch).

A profile's ``versions`` names every package whose behaviour it pins (``STACK``), so a difference
is blamed on the package that changed: failure lines, the upgrade report's heading and the label a
accepted-differences file keeps an install under all say which packages differ. A key belongs to
torch unless ``OWNERS`` gives it to another package too; where one of a key's packages is not
usable on one side (not installed, or installed but refusing to import: its gate key says so),
the key is *not installed here*: no difference, no failure, a line in the report.
"""

from __future__ import annotations

import re
from typing import Any

from ..stack.refusals import DOES_NOT_IMPORT, NOT_MEASURED

__all__ = [
    "STACK",
    "OWNERS",
    "packages_of",
    "unusable",
    "not_installed_here",
    "versions_words",
    "LABEL_STACK",
    "install_label",
    "label_packages",
    "label_matches",
]

# the packages whose behaviour a profile pins, in the order they are named
STACK = ("torch", "torchao", "transformers", "accelerate", "safetensors", "ml_dtypes", "gfloat", "expecttest")

# package -> (the keys it owns, as a regex; the key whose 'missing'/'refused' value says it is not
# usable here, or None where its absence leaves no key of its own)
OWNERS: dict[str, tuple[str, str | None]] = {
    "torchao": (r"^(?:torchao|checkpoint\.torchao|grouped\.torchao|workload\.torchao)(?:\.|$)", "torchao"),
    "transformers": (r"^transformers(?:\.|$)", "transformers.fp8"),
    "accelerate": (r"^(?:transformers\.fp8\.from_pretrained|workload\.torchao\.accelerate_fp8)(?:\.|$)", None),
    "safetensors": (r"\.safetensors$", None),
    # torch's op catalogue imports it: the native op survey's keys (not the Python-scalar ones)
    "expecttest": (r"^native(?:\.(?!scalar\.)|$)", "native"),
}
_NO_ANSWER = ("missing", "refused", "not installed")
# package -> the packages it imports when they are installed: one of those installed but not
# importing leaves this package's keys without an answer of their own (transformers loads FP8
# checkpoints through torchao's quantizer when torchao is installed); absent, it is not tried
IMPORTS_WHEN_INSTALLED = {"transformers": ("torchao",), "accelerate": ("torchao",)}


def packages_of(key: str) -> tuple[str, ...]:
    """The packages besides torch whose behaviour ``key`` pins."""
    return tuple(pkg for pkg, (owned, _) in OWNERS.items() if re.search(owned, key))


def unusable(profile: dict) -> dict[str, str]:
    """The packages of ``OWNERS`` not usable where ``profile`` was collected, with why: not
    installed (its version ``None`` in ``versions``), or its gate key's refusal. A package a
    profile's ``versions`` does not name at all (an older profile) counts as usable."""
    versions = profile.get("versions", {}) if isinstance(profile.get("versions"), dict) else {}
    behaviour = profile.get("behaviour", {})
    out = {}
    for pkg, (_, gate) in OWNERS.items():
        if pkg in versions and versions[pkg] is None:
            out[pkg] = "not installed"
        elif DOES_NOT_IMPORT in str(versions.get(pkg) or ""):
            out[pkg] = str(versions[pkg])
        elif gate is not None and str(behaviour.get(gate, "")).startswith(_NO_ANSWER):
            out[pkg] = str(behaviour[gate])
    for pkg, imported in IMPORTS_WHEN_INSTALLED.items():
        broken = next((dep for dep in imported if DOES_NOT_IMPORT in str(versions.get(dep) or "")), None)
        if pkg not in out and broken is not None:
            out[pkg] = f"imports {broken}, which is unusable: {out[broken]}"
    return out


def _not_measured(key: str, behaviour: dict) -> str | None:
    """Why ``key`` has no answer in ``behaviour`` because fp8ref's own need was missing there: its
    value says so, or it is absent while a key it is under (``native`` for ``native.abs``: a probe
    that could not run writes one key for all it would have written) says so."""
    value = behaviour.get(key)
    if isinstance(value, str) and value.startswith(NOT_MEASURED):
        return value
    if key in behaviour:
        return None
    parts = key.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        above = behaviour.get(".".join(parts[:depth]))
        if isinstance(above, str) and above.startswith(NOT_MEASURED):
            return above
    return None


def not_installed_here(key: str, a: dict, b: dict) -> str | None:
    """Why ``key`` is not compared between ``a`` and ``b`` (one of its packages is not usable on
    one side: ``transformers not installed in B``), or None. That a package is not usable is no
    behaviour of the stack the other side pinned: the run's skips name it, and a runner that must
    have it says so with ``--fp8-require``."""
    for side, p in (("A", a), ("B", b)):
        why = _not_measured(key, p.get("behaviour", {}))
        if why is not None:
            return f"{why} in {side}"
    gated = tuple(pkg for pkg, (_, gate) in OWNERS.items() if gate == key)
    for pkg in (*packages_of(key), *gated):
        for side, p in (("A", a), ("B", b)):
            why = unusable(p).get(pkg)
            if why is not None:
                return f"{pkg} {why if why == 'not installed' else 'unusable: ' + why} in {side}"
    return None


def _version(v: Any) -> str:
    return "not installed" if v is None else str(v)


def versions_words(profile: dict, other: dict | None = None, always: tuple[str, ...] = ("torch", "torchao")) -> str:
    """``torch X, torchao Y, ...``: the packages in ``always``, and those whose version differs from
    ``other``'s (all of ``STACK`` that the profile names when ``other`` is None)."""
    mine = profile.get("versions", {}) if isinstance(profile.get("versions"), dict) else {}
    theirs = other.get("versions", {}) if other is not None and isinstance(other.get("versions"), dict) else None
    names = [
        p
        for p in STACK
        if p in mine and (p in always or theirs is None or _version(mine.get(p)) != _version(theirs.get(p)))
    ]
    names = names or [p for p in always if p in mine] or ["torch"]
    return ", ".join(f"{p} {_version(mine.get(p))}" for p in names)


# what an accepted-differences label names: the stack under test and the device kind, never
# fp8ref's own or test-only packages (ml_dtypes, gfloat, expecttest: installing fp8ref's test extras
# into an unchanged stack must not void a team's accepted differences)
LABEL_STACK = ("torch", "torchao", "transformers", "accelerate", "safetensors", "triton", "device")


def install_label(profile: dict) -> str:
    """How an accepted-differences file names an install: every package of ``LABEL_STACK`` the
    profile's versions name (its version alone: torch's local build tag and a does-not-import note
    dropped, ``2.9.1+cu128`` is 2.9.1), then the device kind: ``torch 2.9.1, torchao 0.17.0,
    transformers 5.24.0, ..., device cpu``."""
    v = profile.get("versions", {}) if isinstance(profile.get("versions"), dict) else {}
    parts = []
    for p in LABEL_STACK:
        if p in v or p in ("torch", "torchao"):
            value = _version(v.get(p))
            value = value if value == "not installed" else value.split(" ")[0]
            parts.append(f"{p} {value.split('+')[0] if p == 'torch' else value}")
    return ", ".join(parts)


def label_packages(label: str) -> dict[str, str]:
    """A label's packages and versions (``torch 2.9.1, torchao 0.17.0`` -> {torch: 2.9.1, ...})."""
    out = {}
    for part in label.split(","):
        name, _, version = part.strip().partition(" ")
        if name:
            out[name] = version.strip()
    return out


def label_matches(label: str, profile: dict) -> bool:
    """True when every package of ``LABEL_STACK`` the label names has that version in ``profile``
    (a label naming torch and torchao only, as older files do, matches whatever else is installed;
    the packages older labels also named, fp8ref's own and test-only ones, are not asked)."""
    mine = label_packages(install_label(profile))
    wanted = {p: v for p, v in label_packages(label).items() if p in LABEL_STACK}
    return bool(wanted) and all(mine.get(p, "not installed") == v for p, v in wanted.items())
