"""The coverage table's own honesty (fp8ref/harness/ao/coverage.py): every check a row names must
be a test function that exists, so the table cannot claim a check nobody wrote. Shared by
tests/cpu/install/test_torchao_surface.py and tests/meta."""

from __future__ import annotations

import re

from tests.common.paths import ROOT


def absent_checks(table: dict[str, tuple[str, ...] | str]) -> list[str]:
    """The rows' test ids (``path::function``) with no such file or no such test function in it."""
    absent = []
    for member, checks in table.items():
        for check in checks if isinstance(checks, tuple) else ():
            path, _, function = check.partition("::")
            source = ROOT / path
            found = source.is_file() and re.search(rf"^def {re.escape(function)}\(", source.read_text(), re.M)
            if not found:
                absent.append(f"{member}: {check}")
    return absent
