"""The stand-in family's one check: torch's E4M3 cast of 300 x 2 saturates to 448 (code 0x7e)."""

from __future__ import annotations

import torch

ANSWER = {"ok": True}  # a test flips it to stand in for an install whose answer changed


def check_saturates() -> str | None:
    """None when 600 casts to E4M3's max, else what it became."""
    code = int(torch.tensor([600.0]).to(torch.float8_e4m3fn).view(torch.uint8)[0])
    if not ANSWER["ok"]:
        code ^= 1
    return None if code == 0x7E else f"600 -> 0x{code:02x}, not 0x7e (448)"
