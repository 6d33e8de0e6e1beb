"""Ways a training job keeps and moves FP8 state, and whether a tensor comes back whole: torch.save,
copy_, flattening, load_state_dict, safetensors, and torch.distributed.checkpoint (DCP, in one
process; over two ranks: tests/scripts/fsdp_float8.py).

A float8 tensor is its bytes and dtype; a torchao quantized tensor subclass is its inner tensors
and its metadata (``__tensor_flatten__``): element codes, block scales, the per-tensor scale,
block size, element dtype, original dtype, scale layout. Each way of keeping it (``KEEP``) must
give back every field, the inner tensors bit for bit. A way the install refuses is a fact to
record (``KeepResult.refused``), not a failure. Used by the checkpoint tests and the behaviour
profile (``checkpoint.*`` keys).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from ..stack.install import has_package
from ..stack.refusals import observe

T = TypeVar("T")

__all__ = [
    "KEEP",
    "ways_for",
    "PLAIN_ONLY",
    "SUBCLASS_ONLY",
    "KeepResult",
    "KNOWN_KEEP_FAILURES",
    "check_kept",
    "fields",
    "field_differences",
    "saved_and_loaded",
    "dcp_saved_and_loaded",
    "dcp_logs_silenced",
    "subclass_examples",
]


def saved_and_loaded(t: T) -> T:
    """``torch.save`` to memory and ``torch.load`` back with the default (weights_only) loader: a
    tensor, or a whole checkpoint (a dict of state dicts)."""
    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    return torch.load(buf)


def _copied(t: torch.Tensor) -> torch.Tensor:
    """``copy_`` into a tensor of the same kind and shape (``t``'s twin with zeroed inner tensors),
    as ``load_state_dict`` and in-place checkpoint loaders do."""
    out = _zeroed_twin(t)
    out.copy_(t)
    return out


def _flattened_and_back(t: torch.Tensor) -> torch.Tensor:
    names, ctx = t.__tensor_flatten__()  # type: ignore[attr-defined]
    return type(t).__tensor_unflatten__({n: getattr(t, n) for n in names}, ctx, t.shape, t.stride())  # type: ignore[attr-defined]


def _through_state_dict(t: torch.Tensor) -> torch.Tensor:
    """A module holding ``t`` as a frozen parameter, its state_dict loaded into a second module
    holding another tensor of the same kind (``t``'s twin with zeroed inner tensors)."""
    src = torch.nn.Module()
    src.w = torch.nn.Parameter(t, requires_grad=False)
    dst = torch.nn.Module()
    dst.w = torch.nn.Parameter(_zeroed_twin(t), requires_grad=False)
    dst.load_state_dict(src.state_dict())
    return dst.w.data if type(dst.w.data) is type(t) else dst.w


def _zeros(t: torch.Tensor) -> torch.Tensor:
    """All-zero bytes in ``t``'s dtype and shape (no fill kernel needed for the dtype)."""
    raw = torch.zeros(t.numel() * t.element_size(), dtype=torch.uint8, device=t.device)
    return raw.view(t.dtype).reshape(t.shape)


def _zeroed_twin(t: torch.Tensor) -> torch.Tensor:
    """A tensor of ``t``'s kind and shape to load ``t`` into: its element codes zeroed, its scales
    valid but other than ``t``'s (``_other_scale``), so a way that keeps the codes and drops the
    scales is seen. The destination a training job loads into holds valid scales: a zero scale is
    no tensor a job makes. torchao's Float8TrainingTensor ``copy_`` takes a source of its own scale
    only ('Every other combination is banned', torchao/float8/float8_ops.py), so its twin keeps
    ``t``'s scale: a different one would make torchao's answer fp8ref's own setup."""
    if not hasattr(t, "__tensor_flatten__"):
        return _zeros(t)
    names, ctx = t.__tensor_flatten__()
    same = type(t).__name__ == "Float8TrainingTensor"
    inner = {
        n: (getattr(t, n).clone() if same else _other_scale(getattr(t, n))) if "scale" in n else _zeros(getattr(t, n))
        for n in names
    }
    return type(t).__tensor_unflatten__(inner, ctx, t.shape, t.stride())  # type: ignore[attr-defined]


def _other_scale(scale: torch.Tensor) -> torch.Tensor:
    """``scale`` with every element moved one binade (up, or down at the top of the format): a
    valid scale of the same dtype that differs from it everywhere. Float8 scales by their codes'
    exponent field (E8M0: the code itself; E4M3: the code +-8), others by doubling."""
    if scale.dtype.itemsize != 1:
        return scale * 2
    codes = scale.view(torch.uint8).to(torch.int16)
    step, top = (1, 0xFE) if scale.dtype == torch.float8_e8m0fnu else (8, 0x7E)  # (0xFF, 0x7F: NaN)
    magnitude = codes & 0x7F if step == 8 else codes
    moved = torch.where(magnitude + step <= top, codes + step, codes - step)
    return moved.to(torch.uint8).view(scale.dtype)


def _through_safetensors(t: torch.Tensor) -> torch.Tensor:
    """``safetensors.torch.save`` and ``load`` through memory (plain tensors only)."""
    from safetensors.torch import load, save

    return load(save({"t": t.contiguous()}))["t"]


def dcp_saved_and_loaded(state: dict[str, Any], into: dict[str, Any]) -> dict[str, Any]:
    """``torch.distributed.checkpoint.save(state)`` to a temporary folder and ``load`` into
    ``into`` (state dicts of the same structure, loaded in place, as training loads a checkpoint:
    torchtitan's way), in one process; returns ``into``. Without a process group DCP warns that it
    assumes one process: said, and silenced here; so is its event log (``dcp_logs_silenced``)."""
    import tempfile
    import warnings

    import torch.distributed.checkpoint as dcp

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(), dcp_logs_silenced():
        warnings.simplefilter("ignore")
        try:
            dcp.save(state, checkpoint_id=folder)
            dcp.load(into, checkpoint_id=folder)
        except dcp.api.CheckpointException as exc:
            # a BaseException that wraps each rank's failure: the failure itself (with its own
            # traceback) says who refused, so refusals.attempt can tell a refusal from a bug
            failure = next(iter(exc.failures.values()))[0]
            raise failure from None
    return into


@contextlib.contextmanager
def dcp_logs_silenced() -> Iterator[None]:
    """torch's DCP event logger disabled while the block runs, as it was after. DCP logs every
    save and load (a start and an end record, and an ERROR record with the error of each it
    refuses) to a logger of its own, ``c10d-<handler>-dcp_logger`` (torch's
    distributed/checkpoint/logger.py ``_dcp_method_logger``; the name from
    distributed/c10d_logger.py ``_get_or_create_logger``), created when DCP is imported. fp8ref's
    refused saves (of torchao tensors, by the profile's checkpoint probe) are expected answers:
    wherever a handler catches that logger, their hundreds of records would bury a failing test's
    own lines. Only that logger, only for fp8ref's own DCP calls; never globally."""
    loggers = [
        logger
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and name.startswith("c10d-") and name.endswith("dcp_logger")
    ]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was in zip(loggers, before):
            logger.disabled = was


def _through_dcp(t: torch.Tensor) -> torch.Tensor:
    """DCP into a tensor of the same kind (``t``'s twin with zeroed inner tensors)."""
    return dcp_saved_and_loaded({"t": t}, {"t": _zeroed_twin(t)})["t"]


KEEP: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "torch.save/load": saved_and_loaded,
    "copy_": _copied,
    "tensor_flatten/unflatten": _flattened_and_back,
    "load_state_dict": _through_state_dict,
    "safetensors": _through_safetensors,
    "dcp": _through_dcp,
}
SUBCLASS_ONLY = ("tensor_flatten/unflatten",)
PLAIN_ONLY = ("safetensors",)  # safetensors stores plain tensors; a subclass is not its format


def ways_for(t: torch.Tensor, keep: dict[str, Callable[[torch.Tensor], torch.Tensor]] | None = None) -> list[str]:
    """The ways of ``keep`` (default ``KEEP``) that apply to ``t``: flattening only to a
    subclass, safetensors only to a plain tensor."""
    subclass = hasattr(t, "__tensor_flatten__")
    skip = PLAIN_ONLY if subclass else SUBCLASS_ONLY
    return [way for way in (keep or KEEP) if way not in skip]


def fields(t: torch.Tensor) -> dict[str, Any]:
    """Everything that makes up ``t``: for a subclass its inner tensors (as bytes, dtype, shape)
    and its metadata; for a plain tensor its bytes, dtype and shape."""
    if not hasattr(t, "__tensor_flatten__"):
        dtype, shape, _stride, data = _as_bytes(t)
        return {"type": type(t).__name__, "data": (dtype, shape, data)}  # values, not strides
    names, ctx = t.__tensor_flatten__()
    out: dict[str, Any] = {"type": type(t).__name__, "shape": tuple(t.shape), "dtype": t.dtype}
    out |= {n: _as_bytes(getattr(t, n)) for n in names}
    meta = ctx if isinstance(ctx, dict) else {"ctx": ctx}
    out |= {k: repr(v) for k, v in meta.items()}
    return out


def _as_bytes(t: torch.Tensor) -> tuple:
    raw = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8)
    return (str(t.dtype), tuple(t.shape), tuple(t.stride()), bytes(raw.tolist()))  # (no numpy needed)


def field_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k, "<absent>"), after.get(k, "<absent>")
        if a != b:
            show = (lambda v: v[:3] if isinstance(v, tuple) else v) if k not in ("type", "dtype") else (lambda v: v)
            out.append(f"{k}: {show(a)!r} -> {show(b)!r}")
    return out


# ways that fail on a dtype with these versions (their words), named so a test reports them rather
# than fails: (way, dtype) -> (the failure's words, what and where it was seen). A failure, not a
# refusal: the way accepted the tensor (safetensors' save writes it) and cannot give it back.
KNOWN_KEEP_FAILURES = {
    ("safetensors", "torch.float8_e8m0fnu"): (
        "fails: KeyError: 'F8_E8M0'",
        "safetensors' save writes float8_e8m0fnu as F8_E8M0 (its _SIZE table has it) but its torch loader's "
        "dtype table has no F8_E8M0 (safetensors/torch.py, _TYPES): the file it wrote does not load "
        "(seen with safetensors 0.8.0)",
    ),
}


@dataclasses.dataclass
class KeepResult:
    lost: dict[str, list[str]]  # way -> "<field>: before -> after" for each field it did not give back
    refused: dict[str, str]  # way -> the install's refusal
    failed: dict[str, str] = dataclasses.field(default_factory=dict)  # way -> "fails: ..." (the install's error)
    known: dict[str, str] = dataclasses.field(default_factory=dict)  # way -> a failure of KNOWN_KEEP_FAILURES

    @property
    def problems(self) -> list[str]:
        return [f"{way}: {d}" for way, diffs in self.lost.items() for d in diffs] + [
            f"{way}: {why}" for way, why in self.failed.items()
        ]


def check_kept(t: torch.Tensor, keep: dict[str, Callable[[torch.Tensor], torch.Tensor]] | None = None) -> KeepResult:
    """``t`` through each way of keeping it that applies (``ways_for``): every field back, inner
    tensors bit for bit."""
    keep = keep or KEEP
    before = fields(t)
    res = KeepResult({}, {})
    for way in ways_for(t, keep):
        if way == "safetensors" and not has_package("safetensors"):
            res.refused[way] = "missing: safetensors is not installed"
            continue
        # (observe: a way that takes the tensor and fails to give it back, inside the library, is a
        # failure recorded as such, not a refusal; fp8ref's own errors still propagate)
        ok, got = observe(functools.partial(keep[way], t))
        if not ok:
            known = KNOWN_KEEP_FAILURES.get((way, str(t.dtype)))
            if not str(got).startswith("fails:"):
                res.refused[way] = str(got)
            elif known is not None and known[0] == str(got):
                res.known[way] = str(got)
            else:
                res.failed[way] = str(got)
            continue
        assert isinstance(got, torch.Tensor)
        diffs = field_differences(before, fields(got))
        if diffs:
            res.lost[way] = diffs
    return res


def subclass_examples(device: str = "cpu") -> dict[str, Callable[[], torch.Tensor]]:
    """torchao's quantized tensor subclasses as training holds them, each built from one bfloat16
    (64, 128) tensor: MX (E4M3, E5M2, FP4 elements; plain and swizzled scales), NVFP4 single and
    two level, and Float8TrainingTensor tensorwise and rowwise (axiswise)."""
    from torchao.float8.config import ScalingGranularity
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    from torchao.float8.float8_training_tensor import LinearMMConfig
    from torchao.prototype.mx_formats.mx_tensor import MXTensor
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    x = (torch.randn(64, 128, generator=torch.Generator().manual_seed(3)) * 5).to(torch.bfloat16).to(device)
    g = x.float().abs().amax() / (6.0 * 448.0)
    return {
        "mx_e4m3": lambda: MXTensor.to_mx(x, torch.float8_e4m3fn, 32),
        "mx_e5m2": lambda: MXTensor.to_mx(x, torch.float8_e5m2, 32),
        "mx_fp4": lambda: MXTensor.to_mx(x, torch.float4_e2m1fn_x2, 32),
        "mx_e4m3_swizzled": lambda: MXTensor.to_mx(x, torch.float8_e4m3fn, 32, is_swizzled_scales=True),
        "nvfp4_single": lambda: NVFP4Tensor.to_nvfp4(x),
        "nvfp4_two_level": lambda: NVFP4Tensor.to_nvfp4(x, per_tensor_scale=g),
        "float8_tensorwise": lambda: hp_tensor_to_float8_dynamic(x, torch.float8_e4m3fn, LinearMMConfig()),
        "float8_rowwise": lambda: hp_tensor_to_float8_dynamic(
            x, torch.float8_e4m3fn, LinearMMConfig(), scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=-1
        ),
    }
