"""The golden profiles: this install's behaviour profile held against the one pinned for its
device kind. A golden is named by a folder (``<folder>/<device kind>.json``, e.g. fp8ref's own
``tests/golden/cpu.json``, ``cuda-sm90.json``) or by a file a user owns (``ci/fp8-stack.json``);
beside either, ``<name>-installs.json`` names the differences accepted per install, with why.

Re-pinning is a deliberate act (``update=True``), never automatic; the file format and the
comparison of two profiles are ``profile_file``'s, the collection ``profile``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..stack.install import device_kind
from ..stack.refusals import NOT_MEASURED
from .profile_file import (
    ACCEPTED_SUFFIX,
    ProfileError,
    accepted_differences_file,
    diff,
    diff_line,
    install_label,
    load,
    not_compared,
    read_accepted,
    read_accepted_file,
    same_value,
    save,
    who,
    write_accepted_file,
)

__all__ = [
    "golden_path",
    "accepted_differences_file",
    "compare_with_golden",
    "pin_first",
    "install_label",
    "accepted_differences",
    "device_mismatch",
    "not_measured_lines",
    "golden_of_another_device",
    "ACCEPTED_SUFFIX",
]


def golden_path(golden: str | Path, device: str = "cpu") -> Path:
    """The golden file for ``device``: ``golden`` itself when it names a ``.json`` file, else
    ``<golden>/<device kind>.json`` (a folder of goldens, one per device kind)."""
    path = Path(golden)
    if path.suffix == ".json" and not path.is_dir():
        if path.name.endswith(ACCEPTED_SUFFIX):
            raise ValueError(f"golden: {path} is a file of accepted differences, not a golden profile")
        return path
    return path / f"{device_kind(device)}.json"


def accepted_differences(golden: str | Path, now: dict, device: str = "cpu") -> tuple[dict, str] | None:
    """The differences from the golden this install is known to show (key -> its value here) and
    why, from the ``-installs.json`` file beside the golden
    (``profile_file.accepted_differences_file``); None when the file does not name this install."""
    return read_accepted(accepted_differences_file(golden_path(golden, device)), now)


def device_mismatch(golden: dict, now: dict, where: str | Path) -> str | None:
    """Why a golden of another device kind cannot hold ``now`` (naming both kinds), or None."""
    pinned, here = golden.get("versions", {}).get("device"), now.get("versions", {}).get("device")
    if pinned == here or pinned is None or here is None:  # (a profile that does not say: not refused)
        return None
    return (
        f"{where} is a golden of device kind {pinned!r}, and this install's profile is of {here!r}: a golden "
        f"holds one device kind (name a file of {here!r}, or a folder of <device kind>.json files)"
    )


def golden_of_another_device(golden: str | Path, device: str) -> str | None:
    """Why the golden ``golden`` names for ``device`` (``golden_path``) cannot hold this install's
    profile on it, read before any profile is collected (a CUDA profile takes minutes): a file of
    another device kind, naming both kinds. None when it is of this kind, is not there yet, or
    cannot be read (the comparison says so then)."""
    path = golden_path(golden, device)
    if not path.is_file():
        return None
    try:
        pinned = load(path)
    except ProfileError:
        return None
    return device_mismatch(pinned, {"versions": {"device": device_kind(device)}}, path)


def _collect(device: str) -> dict:
    from . import profile  # (at call time: a test may stand in for profile.collect)

    return profile.collect(device)


def _drop_own_entry(golden_file: Path, now: dict) -> list[str]:
    """After a re-pin on ``now``'s install: its own entry in the accepted-differences file goes (the
    golden pins its values now, so each difference it named would be a named one that is gone, a
    failure); other installs' entries stay. What was dropped, one line; none when nothing was."""
    named_path = accepted_differences_file(golden_file)
    if not named_path.exists():
        return []
    try:
        named = read_accepted_file(named_path)
    except ProfileError as exc:
        return [f"{exc}: this install's accepted differences, if any, not dropped"]
    label = install_label(now)
    entry = named.pop(label, None)
    if entry is None:
        return []
    write_accepted_file(named_path, named)
    n = len(entry.get("differences", {})) if isinstance(entry, dict) else 0
    return [f"dropped from {named_path} the {n} difference(s) it accepted for this install: the golden pins them now"]


def compare_with_golden(
    golden: str | Path,
    device: str = "cpu",
    update: bool = False,
    now: dict | None = None,
    *,
    how_to_pin: str | None = None,
    collect: Callable[[str], dict] | None = None,
) -> tuple[str, list[str]]:
    """Hold this install's profile (``now``; collected by ``collect``, default
    ``profile.collect``, when not given) against the golden ``golden`` (a folder or a file:
    ``golden_path``) pins for the device kind.

    An install named in the ``-installs.json`` file beside the golden (``accepted_differences``) may differ
    in exactly the keys named for it, each with the value named: then ``("named", [])``; a named
    key that no longer differs, or differs otherwise, is a line like any difference.

    Keys of a package not usable on one side (``profile_file.not_compared``) are no difference.

    Returns (status, lines): ``("equal", [])``, ``("differs", one line per key)``,
    ``("missing", [how to pin])``, ``("unreadable", [what is wrong, how to re-pin])`` (a truncated
    or corrupted golden), ``("wrong device", [both device kinds])`` (a golden of another device
    kind: neither compared nor overwritten) or, with ``update``, ``("updated", [what was
    written])`` or ``("not measured", [each package fp8ref itself needs and lacks here, ...])``
    (nothing written: a golden pins the stack's answers, never fp8ref's own missing package).
    ``how_to_pin``: the command the caller's users re-pin with (default: ``python -m fp8ref
    profile``).
    """
    path = golden_path(golden, device)
    pin = how_to_pin or f"python -m fp8ref profile --device {device} --out {path}"
    if not update and not path.exists():  # checked first: collecting takes tens of seconds on a GPU
        return "missing", [
            f"no golden profile for device kind {device_kind(device)!r} ({path}); pin this one alone, on "
            f"purpose, with `{pin}`, and commit it saying why"
        ]
    if now is None:
        now = (collect or _collect)(device)
    if update:
        unmeasured = not_measured_lines(now)
        if unmeasured:  # (a golden pins the stack's answers: fp8ref's own missing package is none)
            return "not measured", [*unmeasured, f"{path}: not pinned; install what is named and pin again"]
        wrong = _wrong_device_on_disk(path, now)
        if wrong is not None:
            return "wrong device", [wrong, "not overwritten: re-pin into a file of this device kind"]
        verb = "re-pinned" if path.exists() else "pinned"
        path.parent.mkdir(parents=True, exist_ok=True)
        save(now, path)
        return "updated", [
            f"{verb} {path} on {who(now)}; commit it and say why in the message",
            *_drop_own_entry(path, now),
        ]
    try:
        pinned = load(path)
    except ProfileError as exc:
        return "unreadable", [
            f"the golden profile {exc}",
            f"restore it from version control, or re-pin on purpose: `{pin}`",
        ]
    wrong = device_mismatch(pinned, now, path)
    if wrong is not None:
        return "wrong device", [wrong]
    named = accepted_differences(golden, now, device)
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


def _wrong_device_on_disk(path: Path, now: dict) -> str | None:
    """A golden already at ``path`` of another device kind than ``now``'s (its file is not to be
    overwritten by this install's profile), or None."""
    if not path.exists():
        return None
    try:
        pinned = load(path)
    except ProfileError:
        return None  # (a broken golden is re-pinned whole)
    return device_mismatch(pinned, now, path)


def not_measured_lines(now: dict) -> list[str]:
    """One line per package fp8ref needs for itself that was missing where ``now`` was collected
    (``refusals.not_measured``): how many keys it left unmeasured, and what to install."""
    counts: dict[str, int] = {}
    for value in now.get("behaviour", {}).values():
        if isinstance(value, str) and value.startswith(NOT_MEASURED):
            counts[value] = counts.get(value, 0) + 1
    return [f"{n} keys {why}" for why, n in sorted(counts.items())]


def not_compared_lines(golden: str | Path, now: dict, device: str = "cpu") -> list[str]:
    """One line per package not usable on one side (``profile_file.not_compared``): why, and how
    many keys were left out for it. Empty when the golden cannot be read."""
    try:
        pinned = load(golden_path(golden, device))
    except ProfileError:
        return []
    return [f"not compared: {len(keys)} keys ({why})" for why, keys in not_compared(pinned, now).items()]


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
