"""The behaviour profile's families: one line each, the room that holds the family.

A family is a room of ``fp8ref.harness`` (or any importable package) holding two modules:

- ``<room>.profile_keys``: ``collect(where: Where) -> dict``, the keys the family measures
  (``fp8ref.harness.stack.probing``: ``Where`` says the device and whether torchao's keys are
  wanted; ``keys_or_refusal`` isolates one probe, so a refusal is that probe's value);
- ``<room>.meanings``: ``OWNS``, the key namespaces the family owns (``("cast", "finfo")``: every key
  ``cast`` or ``cast.<...>``), and ``MEANINGS``, its rows (``key_meanings.KeyMeaning``): what each key
  means and what its change does to training. No torch there: ``python -m fp8ref diff`` reads them.

A key belongs to the family owning its longest namespace (the state family owns
``torchao.optim`` inside the torchao family's ``torchao``), and only that family's rows can give it
a meaning. A new family is a new room and one line below.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType

__all__ = ["Family", "FAMILIES", "owner_of"]


@dataclasses.dataclass(frozen=True)
class Family:
    """A family of profile keys: ``room`` is the dotted name of the package that holds its
    ``profile_keys`` and ``meanings`` modules."""

    room: str

    @property
    def name(self) -> str:
        return self.room.rsplit(".", 1)[-1]

    def probes(self) -> ModuleType:
        """The room's ``profile_keys`` module (imports torch)."""
        return importlib.import_module(f"{self.room}.profile_keys")

    def meanings(self) -> ModuleType:
        """The room's ``meanings`` module (torch-free)."""
        return importlib.import_module(f"{self.room}.meanings")


# the order the probes run in (the profile is sorted by key, so the order only shows in time)
FAMILIES: list[Family] = [
    Family("fp8ref.harness.casts"),  # finfo, casts into float8 and between float8 dtypes
    Family("fp8ref.harness.state"),  # checkpoints, torchao's FP8 optimizer state, autocast
    Family("fp8ref.harness.gemm"),  # _scaled_mm, FP4 GEMMs, grouped GEMMs, the emulated MLP
    Family("fp8ref.harness.native"),  # torch's native float8 ops, Python scalars, the API surface
    Family("fp8ref.harness.ao"),  # torchao's recipes, casts, MX, NVFP4, surface
    Family("fp8ref.harness.hf"),  # transformers' fine-grained FP8
    Family("fp8ref.harness.workloads"),  # the shipped FP8 workloads, traced
    Family("fp8ref.harness.claims"),  # a team's own FP8 functions against their claims (asked for only)
]


def _owns(namespace: str, key: str) -> bool:
    return key == namespace or key.startswith(namespace + ".")


def owner_of(key: str) -> Family | None:
    """The family owning ``key``'s longest namespace, or None when no family owns it."""
    best: tuple[int, Family] | None = None
    for family in FAMILIES:
        for namespace in family.meanings().OWNS:
            if _owns(namespace, key) and (best is None or len(namespace) > best[0]):
                best = (len(namespace), family)
    return None if best is None else best[1]
