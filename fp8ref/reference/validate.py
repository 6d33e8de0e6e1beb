"""Argument checks shared by every public fp8ref function: one wording for every error.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, bad value)
with the message ``"<argument>: expected <what>, got <what was given>"``, and returns the value
(for ``choice``, the enum member), so a caller writes ``mode = choice(mode, MxMode, "mode")``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from typing import Any, TypeVar

import torch

__all__ = ["Choice", "tensor", "instance", "boolean", "integer", "positive_int", "positive_number", "choice", "one_of"]

E = TypeVar("E", bound="Choice")


class Choice(str, enum.Enum):
    """A named choice whose members are also their string values (``MxMode.FLOOR == "floor"``),
    so callers may pass either, and str/format/JSON give the plain value on every Python."""

    def __str__(self) -> str:
        return str(self.value)


def _kind(value: object) -> str:
    return type(value).__name__


def tensor(
    x: object, name: str, *, dtypes: tuple[torch.dtype, ...] | None = None, floating: bool = False
) -> torch.Tensor:
    """``x`` is a ``torch.Tensor`` (of one of ``dtypes``, or floating point with ``floating``)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {_kind(x)}")
    if dtypes is not None and x.dtype not in dtypes:
        raise TypeError(f"{name}: expected dtype in {[str(d) for d in dtypes]}, got {x.dtype}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    return x


def instance(value: Any, cls: type | tuple[type, ...], name: str, what: str) -> Any:
    """``value`` is an instance of ``cls`` (described to the user as ``what``)."""
    if not isinstance(value, cls):
        raise TypeError(f"{name}: expected {what}, got {_kind(value)}")
    return value


def boolean(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {_kind(value)}")
    return value


def integer(value: object, name: str) -> int:
    """An int (a bool is not one here)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name}: expected an int, got {value!r}")
    return value


def positive_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return value


def positive_number(value: object, name: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")
    return value


def positive_finite(value: Any, name: str) -> Any:
    """A number, or every value of a tensor, finite and > 0 (scales: 0, negative, inf or NaN
    would quantize to nothing meaningful)."""
    if isinstance(value, torch.Tensor):
        bad = ~(torch.isfinite(value) & (value > 0))
        if bool(bad.any()):
            raise ValueError(
                f"{name}: expected positive finite values, got {int(bad.sum())} that are not "
                f"(first {value[bad].flatten()[0].item()!r})"
            )
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and not (0 < value < math.inf):
        raise ValueError(f"{name}: expected a positive finite number, got {value!r}")
    return value


def choice(value: object, kind: type[E], name: str) -> E:
    """The member of ``kind`` named by ``value`` (a member or its string value)."""
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name}: expected one of {tuple(m.value for m in kind)}, got {value!r}") from None


def one_of(value: Any, allowed: Iterable[Any], name: str) -> Any:
    """``value`` is one of ``allowed`` (names from a registry, such as the recipe table)."""
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {tuple(allowed)}, got {value!r}")
    return value
