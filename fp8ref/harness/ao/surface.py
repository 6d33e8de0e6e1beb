"""torchao's FP8 surface, discovered from the install: every dataclass field (with its default)
and every enum member that torchao's float8 training and MX/NVFP4 modules define or import, so a
recipe, a scale mode, a kernel choice or a config field a release adds or removes is one line of
the profile's diff (``torchao.surface.<Class>.<field>``, ``torchao.surface.<Enum>``) and, until
``coverage`` names a check or a reason for it, one failing test.

Nothing is listed by hand but the modules to read (``ROOTS``): the classes are whatever dataclass
or ``enum.Enum`` of torchao those modules hold (``torchao.float8.config``'s own, and what
``prototype.mx_formats`` imports from elsewhere, e.g. ``KernelPreference``). ``members`` takes
stand-in modules too (tests/meta holds a torchao with one added member to it).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from types import ModuleType
from typing import Any

from ..stack.refusals import NOT_MEASURED, unmeasured

__all__ = ["ROOTS", "classes", "members", "profile_keys"]

# the modules whose dataclasses and enums are torchao's FP8 training and MX/NVFP4 surface
ROOTS = (
    "torchao.float8.config",
    "torchao.prototype.mx_formats",
    "torchao.prototype.mx_formats.config",
    "torchao.prototype.mx_formats.mx_tensor",
    "torchao.prototype.mx_formats.nvfp4_tensor",
)


def _import(name: str) -> ModuleType | str:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a torchao without the module, or one that fails to import
        # (torchao's MX code imports numpy: fp8ref's own need, not torchao's answer)
        return unmeasured(exc) or f"missing: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:120]}"


def _is_surface(obj: Any) -> bool:
    return (
        isinstance(obj, type)
        and str(getattr(obj, "__module__", "")).startswith("torchao")
        and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))
    )


def classes(modules: dict[str, ModuleType | str] | None = None) -> dict[str, Any]:
    """The surface's classes by name, from ``modules`` (name -> module, or why it is missing;
    default: ``ROOTS`` imported). A name two modules share is one class."""
    modules = modules if modules is not None else {name: _import(name) for name in ROOTS}
    out: dict[str, Any] = {}  # (dataclass types and enum types)
    for module in modules.values():
        if isinstance(module, str):
            continue
        for name in sorted(vars(module)):
            obj = getattr(module, name)
            if _is_surface(obj):
                out.setdefault(obj.__name__, obj)
    return dict(sorted(out.items()))


def _defaults(cls: Any) -> dict[str, str]:
    """Each field's default as a config built without arguments holds it (torchao 0.17-0.18's
    ``Float8LinearConfig.__post_init__`` writes the float8 dtypes into its shared default
    ``CastConfig`` instances, so the class's own defaults change once any config is built: the
    built one's are the same in every process); a class that needs arguments: its declared
    defaults, ``required`` for a field without one."""
    try:
        built = cls()
    except Exception:  # noqa: BLE001 - a config that needs arguments, or refuses to build here
        built = None
    out = {}
    for field in dataclasses.fields(cls):
        if built is not None:
            value = getattr(built, field.name)
        elif field.default is not dataclasses.MISSING:
            value = field.default
        elif field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
        else:
            out[field.name] = "required"
            continue
        out[field.name] = str(value) if isinstance(value, enum.Enum) else repr(value)
    return out


def members(modules: dict[str, ModuleType | str] | None = None) -> dict[str, str]:
    """Every member of the surface: ``Class.field`` -> its default (``required`` without one) for a
    dataclass, ``Enum.MEMBER`` -> its value for an enum. Dataclasses without fields (markers) are
    members by their name alone."""
    out: dict[str, str] = {}
    for name, cls in classes(modules).items():
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            out.update({f"{name}.{m}": repr(v.value) for m, v in cls.__members__.items()})
            continue
        defaults = _defaults(cls)
        if not defaults:
            out[name] = "a dataclass without fields"
        out.update({f"{name}.{field}": value for field, value in defaults.items()})
    return out


def profile_keys(modules: dict[str, ModuleType | str] | None = None) -> dict[str, str]:
    """``torchao.surface.<Enum>``: its members, in order; ``torchao.surface.<Class>.<field>``: the
    field's default; ``torchao.surface.module.<name>``: ``missing: ...`` for a root that does not
    import (nothing for one that does)."""
    modules = modules if modules is not None else {name: _import(name) for name in ROOTS}
    out = {f"torchao.surface.module.{name}": m for name, m in modules.items() if isinstance(m, str)}
    unmeasured = next((m for m in modules.values() if isinstance(m, str) and m.startswith(NOT_MEASURED)), None)
    if unmeasured is not None:  # (a root fp8ref could not import for want of its own package: which classes
        out["torchao.surface"] = unmeasured  # it holds is unknown, so the whole surface says it was not measured)
    for name, cls in classes(modules).items():
        if issubclass(cls, enum.Enum):
            out[f"torchao.surface.{name}"] = " ".join(cls.__members__)
        else:
            out.update({f"torchao.surface.{name}.{field}": value for field, value in _defaults(cls).items()})
    return out
