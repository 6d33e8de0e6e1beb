"""The stand-in family's one check: torch's E4M3 cast of 1.125, which E4M3 holds exactly (code 0x39)."""

from __future__ import annotations

import torch

ANSWER = {"ok": True}  # a test flips it to stand in for an install whose answer changed


def check_exact_value() -> str | None:
    """None when 1.125 casts to its own code, else what it became."""
    code = int(torch.tensor([1.125]).to(torch.float8_e4m3fn).view(torch.uint8)[0])
    if not ANSWER["ok"]:
        code ^= 1
    return None if code == 0x39 else f"1.125 -> 0x{code:02x}, not 0x39"
