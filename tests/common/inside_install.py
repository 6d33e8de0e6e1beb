"""Stand-ins whose code sits in a library's own folder, for the refusal rule's tests: what they
raise is raised inside the install (fp8ref.harness.stack.refusals decides from where an error was
raised), as that library's own code would raise it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def inside(package: str, source: str) -> Callable[..., Any]:
    """The function ``f`` that ``source`` defines, compiled under a file name in ``package``'s
    folder (``torch`` is in its namespace)."""
    root = Path(str(__import__(package).__file__)).parent
    namespace: dict = {"torch": torch}
    exec(compile(source, str(root / "_fp8ref_stand_in.py"), "exec"), namespace)  # noqa: S102 - a test stand-in
    return namespace["f"]
