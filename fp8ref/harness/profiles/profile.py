"""The behaviour profile of an install: what it does where correct installs may differ.

A profile is JSON: ``versions`` (what produced it), ``behaviour``, a flat, sorted mapping of
dotted keys to plain values, so a difference reads as one line per key (the file format and the
diff: ``profile_file``; the pinned goldens: ``golden``), and ``traces``: the traced calls behind
some of those keys (from a family whose ``profile_keys`` has ``traces(where)``: the workloads'),
which the diff reads to name the call where two installs first part. Each family's room measures its own keys
(``families``); this module asks each in turn. Invariants are asserted elsewhere; the profile
holds what legitimately varies.

Every probe is isolated (``fp8ref.harness.stack.probing.keys_or_refusal``): when the install
refuses an operation, the keys of that probe read ``refused: Type: message`` and every other key
is still collected, so an older or newer install yields a profile whose diff names what changed.
An error that is not a refusal is a bug in fp8ref and propagates.
"""

from __future__ import annotations

import os

from ..stack.install import versions
from ..stack.probing import Where
from . import families
from .profile_file import PROFILE_VERSION

__all__ = ["collect", "with_claims", "of_targets", "with_targets"]


def collect(device: str = "cpu", torchao: bool = True, claims: tuple[str, ...] = ()) -> dict:
    """Every family's keys on ``device`` (``torchao=False``: without torchao's; ``claims``: a
    team's claims targets, whose results join it); returns the profile dict. An operation the
    install refuses is recorded as ``refused: ...`` under the keys of that probe; every other key
    is still collected."""
    from ..claims.targets import checked_targets

    where = Where(device, torchao, checked_targets(claims))
    behaviour: dict = {}
    traces: dict = {}
    for family in families.FAMILIES:
        probes = family.probes()
        keys = probes.collect(where)
        # a key another family owns would take that family's meaning; one collected twice, lose a value
        strays = sorted(k for k in keys if families.owner_of(k) != family or k in behaviour)
        if strays:
            raise RuntimeError(f"fp8ref: the {family.name} family's probes wrote keys it does not own: {strays[:5]}")
        behaviour.update(keys)
        lines = probes.traces(where) if hasattr(probes, "traces") else {}
        unwritten = sorted(set(lines) - set(keys))
        if unwritten:
            raise RuntimeError(f"fp8ref: the {family.name} family traced keys it did not write: {unwritten[:5]}")
        traces.update(lines)
    return {
        "fp8ref_profile": PROFILE_VERSION,
        "versions": versions(device),
        "behaviour": dict(sorted(behaviour.items())),
        "traces": dict(sorted(traces.items())),
    }


def with_claims(profile: dict, claims: tuple[str, ...]) -> dict:
    """``profile`` (a copy) with the keys of a team's claims targets added (``claims``'s family:
    the same keys ``collect(..., claims=claims)`` adds), for a profile collected without them."""
    from ..claims import profile_keys as claim_keys
    from ..claims.targets import checked_targets

    added = claim_keys.collect(Where(claims=checked_targets(claims)))
    return {**profile, "behaviour": dict(sorted({**profile["behaviour"], **added}.items()))}


def of_targets(
    device: str = "cpu",
    *,
    workloads: tuple[str, ...] = (),
    claims: tuple[str, ...] = (),
    folder: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    install: bool = False,
) -> tuple[dict, dict[str, str]]:
    """A team's own golden's profile on ``device``: this install's ``versions`` (which name the
    install an accepted difference is for) and the keys of the team's targets (``with_targets``);
    with ``install``, every family's keys too (``collect``: tens of seconds on a CPU). Returns the
    profile and the targets that gave no result (target -> why)."""
    if install:
        base = collect(device)
    else:
        base = {"fp8ref_profile": PROFILE_VERSION, "versions": versions(device), "behaviour": {}, "traces": {}}
    return with_targets(base, workloads=workloads, claims=claims, folder=folder, timeout=timeout)


def with_targets(
    profile: dict,
    *,
    workloads: tuple[str, ...] = (),
    claims: tuple[str, ...] = (),
    folder: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> tuple[dict, dict[str, str]]:
    """``profile`` (a copy) with a team's targets' keys, their modules imported with ``folder``
    (default: the current one) first on ``sys.path``: each ``--fp8-workload`` target traced
    (``workload.<target>`` and its trace's lines: ``workloads.targets``, within ``timeout``
    seconds) and each ``--fp8-claims`` target's cases (``claim.<target>.<claim>.<case>``). Returns
    it and the targets that gave no result (target -> what they raised): a workload's key then
    reads ``fails: ...``, a claims target has no keys. A key two targets give is a ValueError."""
    from ..claims import profile_keys as claim_keys
    from ..claims.targets import checked_targets
    from ..workloads.targets import target_keys

    behaviour = dict(profile["behaviour"])
    traces = dict(profile.get("traces", {}))
    keys, lines, failed = target_keys(workloads, folder, timeout)
    for target in dict.fromkeys(checked_targets(claims)):
        try:
            got = claim_keys.target_keys((target,), folder)
        except Exception as exc:  # noqa: BLE001 - the team's function, whatever it raised (its item says so)
            failed[target] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            continue
        both = sorted(set(got) & set(keys))
        if both:
            raise ValueError(f"claims target {target!r} gives the key {both[0]} another target gave: rename one")
        keys.update(got)
    known = sorted(set(keys) & set(behaviour))
    if known:
        raise ValueError(f"a team's target gives the key {known[0]}, which the profile holds already: rename it")
    behaviour.update(keys)
    traces.update(lines)
    return {**profile, "behaviour": dict(sorted(behaviour.items())), "traces": dict(sorted(traces.items()))}, failed
