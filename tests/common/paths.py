"""Where things are in the checkout, for tests wherever they sit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
PACKAGE = ROOT / "fp8ref"
GOLDEN = ROOT / "tests" / "golden"  # the pinned behaviour profiles, one per device kind
SCRIPTS = ROOT / "tests" / "scripts"  # the code the processes beside the tests run
