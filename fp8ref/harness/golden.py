"""The golden profiles: this install's behaviour profile held against the one pinned for its
device kind (``<golden_dir>/<device kind>.json``, e.g. ``cpu.json``, ``cuda-sm90.json``).

Re-pinning is a deliberate act (``update=True``), never automatic; the file format and the
comparison of two profiles are ``profile_file``'s, the collection ``profile``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .install import device_kind
from .profile_file import ProfileError, diff, diff_line, load, same_value, save, who

__all__ = ["golden_path", "compare_with_golden", "pin_first", "install_label", "named_differences", "NAMED_FILE"]

# beside each golden: the differences other installs are known to show, per install and device kind
NAMED_FILE = "{kind}-installs.json"


def golden_path(golden_dir: str | Path, device: str = "cpu") -> Path:
    return Path(golden_dir) / f"{device_kind(device)}.json"


def install_label(profile: dict) -> str:
    """``torch X, torchao Y`` with torch's local build tag dropped (``2.9.1+cu128`` is 2.9.1):
    how the named-differences file names an install."""
    v = profile.get("versions", {})
    return f"torch {str(v.get('torch')).split('+')[0]}, torchao {v.get('torchao')}"


def named_differences(golden_dir: str | Path, now: dict, device: str = "cpu") -> tuple[dict, str] | None:
    """The differences from the golden this install is known to show (key -> its value here) and
    why, from ``<golden_dir>/<kind>-installs.json``; None when the file does not name it."""
    path = Path(golden_dir) / NAMED_FILE.format(kind=device_kind(device))
    if not path.exists():
        return None
    try:
        entry = json.loads(path.read_text()).get(install_label(now))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("differences"), dict) or not entry.get("why"):
        raise ProfileError(f"{path}: the entry for {install_label(now)} needs 'why' and a 'differences' object")
    return entry["differences"], entry["why"]


def _collect(device: str) -> dict:
    from . import profile  # (at call time: a test may stand in for profile.collect)

    return profile.collect(device)


def compare_with_golden(
    golden_dir: str | Path,
    device: str = "cpu",
    update: bool = False,
    now: dict | None = None,
    *,
    how_to_pin: str | None = None,
    collect: Callable[[str], dict] | None = None,
) -> tuple[str, list[str]]:
    """Hold this install's profile (``now``; collected by ``collect``, default
    ``profile.collect``, when not given) against the one pinned for the device kind.

    An install named in ``<golden_dir>/<kind>-installs.json`` (``named_differences``) may differ
    in exactly the keys named for it, each with the value named: then ``("named", [])``; a named
    key that no longer differs, or differs otherwise, is a line like any difference.

    Returns (status, lines): ``("equal", [])``, ``("differs", one line per key)``,
    ``("missing", [how to pin])``, ``("unreadable", [what is wrong, how to re-pin])`` (a truncated
    or corrupted golden) or, with ``update``, ``("updated", [what was written])``. ``how_to_pin``:
    the command the caller's users re-pin with (default: ``python -m fp8ref profile``).
    """
    path = golden_path(golden_dir, device)
    pin = how_to_pin or f"python -m fp8ref profile --device {device} --out {path}"
    if not update and not path.exists():  # checked first: collecting takes tens of seconds on a GPU
        return "missing", [
            f"no golden profile for device kind {device_kind(device)!r} ({path}); pin this one alone, on "
            f"purpose, with `{pin}`, and commit it saying why"
        ]
    if now is None:
        now = (collect or _collect)(device)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        save(now, path)
        return "updated", [f"re-pinned {path} on {who(now)}; commit it and say why in the message"]
    try:
        pinned = load(path)
    except ProfileError as exc:
        return "unreadable", [
            f"the golden profile {exc}",
            f"restore it from version control, or re-pin on purpose: `{pin}`",
        ]
    named = named_differences(golden_dir, now, device)
    expected = named[0] if named is not None else {}
    lines, seen = [], set()
    for key, old, new in diff(pinned, now):
        if key in expected and same_value(key, expected[key], new):
            seen.add(key)
            continue
        lines.append(diff_line(key, old, new, pinned, now))
    for key in sorted(set(expected) - seen):
        lines.append(
            f"{key}: named as {expected[key]!r} for {install_label(now)}, but now {now['behaviour'].get(key)!r} "
            f"(pinned {pinned['behaviour'].get(key)!r})"
        )
    return ("differs" if lines else ("named" if seen else "equal")), lines


def pin_first(
    out_dir: str | Path, device: str = "cpu", *, collect: Callable[[str], dict] | None = None
) -> tuple[str, list[str]]:
    """A device kind with no golden yet (a first GPU run): collect this install's profile, pin it
    in ``out_dir`` (``<out_dir>/<device kind>.json``), collect again and compare with the pin, so
    the first run already checks that the profile is deterministic on this device.

    Returns ``("pinned", [where it is, what to do with it])`` or ``("differs", one line per key
    that changed between the two collections)``."""
    collect = collect or _collect
    status, lines = compare_with_golden(out_dir, device, update=True, now=collect(device))
    if status != "updated":
        return status, lines
    status, lines = compare_with_golden(out_dir, device, now=collect(device))
    if status != "equal":
        return "differs", lines
    path = golden_path(out_dir, device)
    return "pinned", [
        f"pinned {path} and a second collection matched it; to pin this device kind, copy it to "
        f"tests/golden/{path.name} and commit it saying which device and versions produced it"
    ]
