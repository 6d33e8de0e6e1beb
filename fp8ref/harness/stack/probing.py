"""What every family's profile probes share: where they run, one probe's keys or the install's
refusal, and a digest of tensors' bits.

A family's probes (``fp8ref/harness/<room>/profile_keys.py``) measure the keys the family owns and
write each answer down; ``keys_or_refusal`` isolates one probe, so an install that refuses an
operation yields ``refused: ...`` for that probe's keys and every other key is still collected.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable

import torch

from .install import device_kind
from .refusals import observe, own_need

__all__ = ["Where", "keys_or_refusal", "tensor_bytes", "digest", "describe_cast"]


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a profile is collected: the torch ``device``, whether torchao's keys are collected
    (``torchao=False``: ``python -m fp8ref profile --no-torchao``), and a team's claims targets
    whose results join it (``claims``: ``pkg.module:function``, ``fp8ref.harness.claims.targets``)."""

    device: str = "cpu"
    torchao: bool = True
    claims: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        device_kind(self.device)  # validates, naming the argument

    @property
    def kind(self) -> str:
        """``cpu``, or the CUDA device's kind (``cuda-sm90``, ...)."""
        return device_kind(self.device)


def keys_or_refusal(keys: list[str], probe: Callable[..., dict], device: str = "cpu") -> dict:
    """``probe()``'s keys, or each of ``keys`` set to the install's refusal (``refused: ...``) or
    its failure (``fails: ...``: an error of the install on an input it supports) when the probe
    meets one (``refusals.observe``). An error of fp8ref's own propagates, and so does a device
    fault, which a CUDA ``device`` is synchronized for: see ``fp8ref.harness.stack.refusals``."""
    ok, result = observe(probe, device)
    if ok and not isinstance(result, dict):  # (a probe that forgot its return: fp8ref's bug, not a value)
        name = getattr(probe, "__name__", probe)
        raise TypeError(f"probe {name!r}: expected a dict of keys, got {type(result).__name__}")
    return result if isinstance(result, dict) else {k: result for k in keys}


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A tensor's bytes in its logical order, through numpy where it is installed and without it
    where not (numpy is fp8ref's own need, never the install's: a digest must not depend on it)."""
    flat = t.detach().reshape(-1).contiguous().cpu().view(torch.uint8)
    try:
        return flat.numpy().tobytes()
    except (ImportError, RuntimeError) as exc:  # (torch without numpy: "Numpy is not available")
        if own_need(exc) != "numpy" and "Numpy is not available" not in str(exc):  # (a numpy torch cannot use)
            raise
        return bytes(flat.tolist())  # (C-speed list then bytes: ~5 ms per 100 kB)


def digest(*tensors: torch.Tensor) -> str:
    """The first 16 hex digits of the SHA-256 of the tensors' bytes: a change of any bit changes it."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(tensor_bytes(t))
    return h.hexdigest()[:16]


def describe_cast(codes: torch.Tensor, scale: torch.Tensor) -> str:
    """A small cast, readably: its scales and its codes in hex."""
    hexes = " ".join(f"{int(c):02x}" for c in codes.flatten().tolist())
    return f"scale {[float(v) for v in scale.flatten().tolist()]}; codes {hexes}"
