"""The stand-in family's one probe."""

from __future__ import annotations

from fp8ref.harness.stack.probing import Where, keys_or_refusal

from .checks import check_exact_value


def collect(where: Where) -> dict:
    key = "standin.e4m3fn.exact_value"
    return keys_or_refusal([key], lambda: {key: check_exact_value() or "exact"}, where.device)
