"""torchao's FP8 surface: a stand-in torchao whose releases add a scale mode, a recipe and a config
field, and a coverage table that names a check nobody wrote; each through the checks
tests/cpu/install/test_torchao_surface.py runs. The stand-in is torchao's own modules with those
classes replaced (the discovery reads modules, so it cannot tell)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import types

import pytest

from fp8ref.harness.ao import coverage, surface
from tests.common.paths import ROOT

pytestmark = pytest.mark.needs("torchao")


def _with_added_member(cls: type[enum.Enum], member: str) -> type:
    values = {m: v.value for m, v in cls.__members__.items()} | {member: member.lower()}
    return enum.Enum(cls.__name__, values, module=cls.__module__)  # type: ignore[return-value]


def _with_added_field(cls: type, field: str) -> type:
    added = dataclasses.make_dataclass(
        cls.__name__, [(field, bool, dataclasses.field(default=False))], bases=(cls,), frozen=True
    )
    added.__module__ = cls.__module__
    return added


def standin_torchao(changes: dict[str, type]) -> dict[str, types.ModuleType | str]:
    """surface.ROOTS imported, each module's classes named in ``changes`` replaced."""
    out: dict[str, types.ModuleType | str] = {}
    for name in surface.ROOTS:
        real = importlib.import_module(name)
        module = types.ModuleType(name)
        module.__dict__.update({k: changes.get(k, v) for k, v in vars(real).items()})
        out[name] = module
    return out


def _added() -> dict[str, tuple[str, type]]:
    from torchao.float8.config import Float8LinearConfig, Float8LinearRecipeName
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    return {
        "ScaleCalculationMode.FOO": ("ScaleCalculationMode", _with_added_member(ScaleCalculationMode, "FOO")),
        "Float8LinearRecipeName.BLOCKWISE": (
            "Float8LinearRecipeName",
            _with_added_member(Float8LinearRecipeName, "BLOCKWISE"),
        ),
        "Float8LinearConfig.foo": ("Float8LinearConfig", _with_added_field(Float8LinearConfig, "foo")),
    }


ADDED = ("ScaleCalculationMode.FOO", "Float8LinearRecipeName.BLOCKWISE", "Float8LinearConfig.foo")


def surface_fault_caught(member: str) -> bool:
    name, cls = _added()[member]
    missing = coverage.uncovered(surface.members(standin_torchao({name: cls})))
    return missing == [member]


@pytest.mark.parametrize("member", ADDED)
def test_a_member_a_torchao_release_adds_fails_coverage_naming_it(member):
    assert surface_fault_caught(member), f"{member}: not named as uncovered"


def test_the_stand_in_without_changes_is_covered():
    assert coverage.uncovered(surface.members(standin_torchao({}))) == []


def test_a_coverage_row_naming_a_check_nobody_wrote_is_caught():
    table = {"ScaleCalculationMode.FLOOR": ("tests/cpu/install/test_mx_modes.py::test_floor_is_checked_somewhere",)}
    assert coverage.absent_checks(table, ROOT) == [
        f"ScaleCalculationMode.FLOOR: {table['ScaleCalculationMode.FLOOR'][0]}"
    ]
