"""The golden profiles: this install's behaviour profile held against the one pinned for its
device kind (``<golden_dir>/<device kind>.json``, e.g. ``cpu.json``, ``cuda-sm90.json``).

Re-pinning is a deliberate act (``update=True``), never automatic; the file format and the
comparison of two profiles are ``profile_file``'s, the collection ``profile``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .install import device_kind
from .profile_file import ProfileError, format_diff, load, save, who

__all__ = ["golden_path", "compare_with_golden", "pin_first"]


def golden_path(golden_dir: str | Path, device: str = "cpu") -> Path:
    return Path(golden_dir) / f"{device_kind(device)}.json"


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
    lines = format_diff(pinned, now)
    return ("differs" if lines else "equal"), lines


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
