"""The stand-in family's one probe."""

from __future__ import annotations

from fp8ref.harness.stack.probing import Where, keys_or_refusal

from .checks import check_saturates


def collect(where: Where) -> dict:
    key = "standin.e4m3fn.saturates"
    return keys_or_refusal([key], lambda: {key: check_saturates() or "saturate"}, where.device)
