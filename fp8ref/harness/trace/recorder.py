"""The dispatch mode that records and checks: every aten op whose inputs or outputs hold a float8
dtype (and every scaled GEMM) is recorded, with its call site, and held to its kind's check
(``op_checks``) before the traced code goes on; so are the calls ``dequantized.Follower`` finds on
the block-scaled and weight-only paths (an E8M0 scale's power of two, a GEMM of decoded values).

torch's tensors for tracing a program without running it (fake tensors, and functional ones
over fake or meta tensors: ``torch.export.export``, ``run_decompositions``) hold no values: their
ops pass, counted in ``Trace.staged``. Running the exported program runs plain ops, recorded as
any other.

Tensor subclasses (torchao's Float8TrainingTensor, Float8Tensor, MXTensor) are seen through: a
mode is asked first, and for an op on a subclass this one returns ``NotImplemented``, so the
subclass's ``__torch_dispatch__`` runs and the ops it runs on its inner tensors (the float8
codes, the scales) come back to the mode as plain ops. That is how torch's ``DebugMode`` (torch
>= 2.10) treats DTensor; the subclass-level call is kept in ``Trace.through``.

A ``torch.library.custom_op`` (modded-nanogpt's FP8 matmul) is seen through too: its kernel runs
with this mode pushed again, so the casts and ``_scaled_mm`` inside it are recorded as plain ops
(else the whole op would be one unchecked call, judged, worse, by an aten op of the same name).
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..judge.stored import logical_bytes, readable, snapshot, written_outside
from ..native.native_op_kinds import UNCHECKED
from .call_site import call_site
from .dequantized import Follower, Linked
from .op_checks import FLOAT8, SCALED_GEMMS, check_call, touches_float8
from .records import Record, TensorInfo, Trace

__all__ = ["TraceMode", "CompiledTraceMode"]

_HASH_DIGITS = 16


_FUNCTIONAL = (
    "on a functional tensor over real values (torch.func.functionalize run eagerly): run, not seen into; "
    "trace the function unfunctionalized"
)


def _without_values(tree: Any) -> bool:
    """Whether the call's tensors are torch's for tracing a program without running it: fake
    tensors, or functional ones over fake or meta tensors (``torch.export`` building its graph).
    A functional tensor over real values (``torch.func.functionalize`` run eagerly) holds them."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    tensors = _tensors(tree)
    for t in tensors:
        if isinstance(t, FunctionalTensor):
            t = torch._from_functional_tensor(t.elem)
        if not (isinstance(t, FakeTensor) or t.is_meta):
            return False
    return bool(tensors)


def _info(t: torch.Tensor, digest: bool) -> TensorInfo:
    sha = ""
    if digest and readable(t):
        # (its bytes in logical order, read from its storage: judge.stored)
        sha = hashlib.sha256(logical_bytes(t)).hexdigest()[:_HASH_DIGITS]
    return TensorInfo(str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()), str(t.device), sha)


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [v for v in tree_flatten(tree)[0] if isinstance(v, torch.Tensor)]


def _written(func: Any) -> set[str]:
    """The names of the arguments the op writes to (its schema says which)."""
    return {a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write}


def _input_infos(func: Any, args: tuple, kwargs: dict) -> tuple[TensorInfo, ...]:
    """Each input tensor's ``TensorInfo``, hashed but for those the op writes to: what such a
    destination held before (``torch.empty``'s memory, an ``out=`` buffer) is no input to pin."""
    written, names = _written(func), [a.name for a in func._schema.arguments]
    named = [(names[i] if i < len(names) else "", v) for i, v in enumerate(args)] + list(kwargs.items())
    return tuple(_info(t, name not in written) for name, v in named for t in _tensors(v))


def _before(func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, list[tuple[str, torch.Tensor, torch.Tensor]]]:
    """The arguments as the op finds them: a snapshot of each tensor it writes to (its schema says
    which), taken before it runs, as memory (``judge.stored.snapshot``: ``clone`` is a kernel
    under check); and each such ``(argument name, tensor, snapshot)``, to find the bytes the op
    wrote outside the view it was given."""
    written = _written(func)
    if not written:
        return args, kwargs, []
    kept: list[tuple[str, torch.Tensor, torch.Tensor]] = []

    def copy(name: str, v: Any) -> Any:
        def one(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            if not readable(t):
                return t.clone()
            held = snapshot(t)
            kept.append((name, t, held))
            return held

        return tree_map(one, v)

    names = [a.name for a in func._schema.arguments]
    args = tuple(copy(names[i], v) if i < len(names) and names[i] in written else v for i, v in enumerate(args))
    return args, {k: copy(k, v) if k in written else v for k, v in kwargs.items()}, kept


def _strays(kept: list[tuple[str, torch.Tensor, torch.Tensor]]) -> str:
    """A float8 destination's bytes outside its view that the op wrote, said in a line ('' when none)."""
    for name, tensor, held in kept:
        if tensor.dtype in FLOAT8 and (stray := written_outside(tensor, held)) is not None:
            count, at, was, now = stray
            return (
                f"{name}: wrote {count} byte(s) of its storage outside the view it was given "
                f"(first at storage byte {at}: was 0x{was:02x}, now 0x{now:02x})"
            )
    return ""


def _is_custom_op(func: Any) -> bool:
    from torch._library.custom_ops import _maybe_get_opdef

    return func.namespace not in ("aten", "prims") and _maybe_get_opdef(func) is not None


_DYNAMO_ENTRY = os.path.join("_dynamo", "eval_frame.py")


def _in_compiled_function() -> bool:
    """Whether the op runs inside a torch.compile'd function (its entry frame is on the stack)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_DYNAMO_ENTRY):
            # (torch's own functions pass through a DisableContext there too: only an
            # OptimizeContext is a torch.compile'd function)
            context = frame.f_locals.get("self")
            if type(context).__name__ == "OptimizeContext":
                return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _below_python(tree: Any) -> Any:
    """The dispatch keys of the call's tensors below the Python mode's key: redispatched there,
    the op runs its own kernel, not this mode again."""
    tensors = _tensors(tree)
    found = torch._C._dispatch_keys(tensors[0]) if tensors else torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    for t in tensors[1:]:
        found = found | torch._C._dispatch_keys(t)
    return found & torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)


class TraceMode(TorchDispatchMode):
    """Records into ``trace`` (see the module docstring)."""

    notes_eager_compile = True  # (torch.compile'd code runs eagerly under this mode: say so)

    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self.trace = trace
        self.follower = Follower(_info)  # (block-scaled and weight-only paths: ``dequantized``)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        subclasses = [t for t in types if t.__torch_dispatch__ is not torch._C._disabled_torch_dispatch_impl]
        if subclasses and _without_values((args, kwargs)):  # (a program traced, not run)
            self.trace.staged += 1
            return func(*args, **kwargs)
        if any(t.__name__ == "FunctionalTensor" for t in subclasses):  # (over real values: run, not seen into)
            out = func(*args, **kwargs)
            if touches_float8((args, kwargs)) or touches_float8(out):
                self._unchecked(func, args, kwargs, out, _FUNCTIONAL)
            return out
        if subclasses:  # (the subclass runs it; its inner ops come back here)
            names = ", ".join(sorted({t.__name__ for t in subclasses}))
            self.trace.through.append((str(func), names, call_site()))
            return NotImplemented
        if _is_custom_op(func):  # (its body's ops come back here)
            self.trace.through.append((str(func), "torch.library.custom_op", call_site()))
            with self:
                return func.redispatch(_below_python((args, kwargs)), *args, **kwargs)
        wanted = func.overloadpacket.__name__ in SCALED_GEMMS or touches_float8((args, kwargs))
        before_args, before_kwargs, kept = _before(func, args, kwargs) if wanted else (args, kwargs, [])
        before = (before_args, before_kwargs)
        out = func(*args, **kwargs)
        for linked in self.follower.after(func, args, kwargs, out):
            self._linked(linked)
        if not (wanted or touches_float8(out)):
            return out
        verdict = check_call(func, *before, out)
        if (stray := _strays(kept)) and verdict.status != "violation":  # (bytes beside its view: no output of it)
            verdict.status, verdict.reason, verdict.problem = "violation", "", stray
        uninitialized = verdict.reason == UNCHECKED["empty"]  # (its bytes are whatever memory held)
        record = Record(
            index=len(self.trace.records),
            op=str(func),
            site=call_site(),
            inputs=_input_infos(func, *before),
            outputs=tuple(_info(t, not uninitialized) for t in _tensors(out)),
        )
        record.kind, record.status, record.reason = verdict.kind, verdict.status, verdict.reason
        record.problem, record.difference = verdict.problem, verdict.difference
        record.observed, record.known_deviations = verdict.observed, verdict.known_deviations
        self.trace.records.append(record)
        if self.notes_eager_compile and _in_compiled_function():
            self.trace.ran_eagerly += 1
        return out

    def _linked(self, linked: Linked) -> None:
        """A call ``dequantized`` judged (an E8M0 scale's arithmetic, a dequantized GEMM)."""
        record = Record(len(self.trace.records), linked.op, linked.site, linked.inputs, linked.outputs)
        verdict = linked.verdict
        record.kind, record.status, record.reason = verdict.kind, verdict.status, verdict.reason
        record.problem, record.difference = verdict.problem, verdict.difference
        self.trace.records.append(record)

    def _unchecked(self, func: Any, args: tuple, kwargs: dict, out: Any, reason: str) -> None:
        record = Record(
            index=len(self.trace.records),
            op=str(func),
            site=call_site(),
            inputs=tuple(_info(t, False) for t in _tensors((args, kwargs))),
            outputs=tuple(_info(t, False) for t in _tensors(out)),
        )
        record.kind, record.status, record.reason = "unchecked", "unchecked", reason
        self.trace.records.append(record)


class CompiledTraceMode(TraceMode):
    """``TraceMode`` that lets torch.compile run: off while torch.compile traces and generates
    code, back while that code runs (``trace.compiled``). Without it torch.compile runs the
    function eagerly under the mode."""

    notes_eager_compile = False

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True
