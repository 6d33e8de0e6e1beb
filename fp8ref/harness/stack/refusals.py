"""When an install *refuses* an operation, and when an error is a failure: the one rule.

A refusal is the install saying no to an input it does not support: an older torch without a
CPU rowwise ``_scaled_mm``, a torchao that does not import with this torch, a dtype a library
has no table entry for. It is a fact about the install, reported (a profile value, a skip naming
the versions), never a traceback. Everything else is a failure with its traceback: an error
raised by fp8ref's or the tests' own code (a typo must fail, never skip), a library's assertion
on an input it claims to support, a wrong answer. The rule decides from *where* the error was
raised and *what it says*; both must hold.

Where (``raised_by_install``):
- inside the install: the innermost frame is in a file of one of ``INSTALL_PACKAGES``; or
- by a native function the caller's line called: the innermost frame is a line of other code
  that is not a ``raise`` or ``assert`` statement, and the error is one native torch code raises
  (``NATIVE_ERRORS``: a C++ ``TORCH_CHECK`` surfaces in the Python frame that called it), an
  ``ImportError`` (the import system, for a module or name the install lacks), or an
  ``AttributeError`` naming a module of the install (``module 'torch' has no attribute ...``: a
  function or dtype the install lacks). An ``AttributeError`` on an object (``'Tensor' object has
  no attribute 'detatch'``) is the caller's own mistake.

What (``declined``), with the reason each counts:
- ``NotImplementedError``: the library's own way of saying an input is not handled.
- ``ImportError``: the install lacks the module or name.
- ``AttributeError`` naming a module of the install: it lacks the function or dtype.
- A message in ``DECLINING_WORDS`` ("not implemented for", "not supported", "requires CUDA",
  "Could not run ... backend", ...): the library's words for an input it does not handle.
- A message in ``DOCUMENTED_LIMITS``: a library's check that says no in other words, each listed
  with the package, the exception type, the words and where the library documents the limit. A
  limit of a native op (``Limit.ops``) matches only the call it documents: the error must carry
  the call's record (made by ``call``, which probes call the op through), the op that raised must
  be one it names, the error must have been raised inside that call (no frame of other code below
  it), and ``Limit.when`` must accept the call's arguments (``_scaled_mm``'s: torch's own meta
  registration takes them). The same words from any other call are no refusal.

Never a refusal or a decline: a call a native function rejects as malformed from the caller's
line, a shape that does not multiply or broadcast, a view of the wrong size, a value of another
dtype than the destination's (``CALL_FAULTS``). Such a call is fp8ref's own mistake; probes build
each call as a user would (a float8 value into a float8 destination, scales of the documented
shapes and dtypes). The same words raised inside the install's own Python code are about a call
the install made, and judged as any other error of the install.

Never a refusal, wherever raised: an exception that is not an ``Exception`` (KeyboardInterrupt,
SystemExit), ``MemoryError``, and a device fault (an illegal memory access, a misaligned address, a
launch failure, a device-side assert). A device fault breaks the CUDA context, so every later call
fails too; were it a refusal, every later probe would read "refused" and every later test would
skip. Probes of a CUDA device synchronize inside the attempted call, so a fault surfaces in the
call that caused it (``DEVICE_FAULTS``).

How it is used: ask the capability question once, with the smallest call that answers it
(``attempt`` inside a ``*_refusal`` probe, ``fp8ref.harness.stack.probes``), skip on its answer, then
run the check itself unguarded. A check never runs inside ``attempt``: an error in the check's own
code would otherwise read as the install's refusal.

One more rule lives here because it is the same question asked of a survey: ``op_declines`` (an
op of torch's own catalogue run on float8 samples; see its docstring).
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
import logging
import re
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "INSTALL_PACKAGES",
    "NATIVE_ERRORS",
    "DECLINING_WORDS",
    "DOCUMENTED_LIMITS",
    "DEVICE_FAULTS",
    "Limit",
    "Call",
    "call",
    "CALL_FAULTS",
    "malformed",
    "raised_by_install",
    "declined",
    "refusal",
    "is_refusal",
    "op_declines",
    "survey",
    "import_refusal",
    "normalize",
    "describe",
    "attempt",
    "observe",
    "OWN_NEEDS",
    "NOT_MEASURED",
    "DOES_NOT_IMPORT",
    "own_need",
    "not_measured",
    "unmeasured",
]

T = TypeVar("T")

# Packages whose code counts as "the install": an error raised from their files is their answer.
INSTALL_PACKAGES = (
    "torch",
    "torchao",
    "ml_dtypes",
    "numpy",
    "triton",
    "functorch",
    "safetensors",
    "transformers",
    "accelerate",
    "mslk",
)

# What a native (C/C++) torch function raises: c10::Error and friends map to these.
NATIVE_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)

# The words libraries use for an input they do not handle (matched case-insensitively). Python's
# own "unsupported operand type(s)" (arithmetic on the caller's line) is excluded below.
DECLINING_WORDS = re.compile(
    r"not implemented"
    r"|not (?:yet )?supported|is unsupported|unsupported (?:dtype|device|scalar ?type|type|layout|format)"
    r"|does not support|doesn't support|do not support|cannot support"
    r"|(?:is|are) only (?:supported|available|implemented)|only supports?\b|only available"
    r"|requires? (?:CUDA|a GPU|GPU|compute capability|sm_?\d|SM ?\d|\w+ (?:to be )?installed|triton|hardware)"
    r"|\w+ is required (?:for|to|by)\b|needs? (?:triton|CUDA|a GPU|GPU)\b"
    r"|Could not run '.*' with arguments from the '.*' backend"
    r"|no kernel (?:image|found|registered)"
    r"|(?:is|are|kernels?) not available|not compiled with|not built with",
    re.IGNORECASE,
)
# CPython's own words for a mistake on the caller's line (a wrong call, a comparison of the wrong
# types, a bad index): never the install's, though some hold declining words ("'<' not supported
# between instances of ...", "a bytes-like object is required, not 'str'")
_PYTHON_WORDS = re.compile(
    r"unsupported operand type|between instances of|is required, not|unexpected keyword argument"
    r"|positional argument|keyword-only argument|keyword argument repeated"
    r"|object is not (?:callable|subscriptable|iterable)|received an invalid combination of arguments"
    r"|unhashable type|has no len\(\)|values to unpack|index out of range|invalid literal for|could not convert"
    r"|cannot be interpreted as an integer|must be (?:str|int|a string|a real number)|not all arguments converted",
    re.IGNORECASE,
)
# torch.compile's own errors (a graph dynamo cannot trace, a backend that failed to compile):
# never the install declining an input by their words (dynamo's "does not support" is a graph
# break of the compiled check), only through a documented limit
_COMPILER_ERRORS = ("Unsupported", "UserError", "BackendCompilerFailed", "InductorError", "LoweringException")
# torch's words for a malformed call (module docstring, "Never a refusal or a decline"): operands
# whose shapes do not multiply or broadcast, a view or reshape to a size the tensor does not have,
# a value of another dtype than the destination's where torch requires the same (ATen's matmul,
# view and index_put checks, TensorIterator's broadcast)
CALL_FAULTS = re.compile(
    r"shapes cannot be multiplied|size mismatch|inconsistent tensor size|must match the size of tensor"
    r"|shape '\[[^\]]*\]' is invalid for input of size|view size is not compatible with input tensor"
    r"|dtypes match|must have the same dtype|to have the same dtype",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class Call:
    """A native op's call as ``call`` made it: the op's name (``torch._scaled_mm``), its
    arguments, and the frame that called it (the error must have been raised inside it)."""

    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


_CALL_ATTRIBUTE = "_fp8ref_call"


def _resolve(op: str) -> Callable[..., Any]:
    """The function ``op`` names (``torch._scaled_mm``, ``torch.nn.functional.scaled_mm``)."""
    import importlib

    module, _, name = op.rpartition(".")
    if not module.startswith("torch"):
        raise ValueError(f"op: expected a torch function's dotted name, got {op!r}")
    return getattr(importlib.import_module(module), name)


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    """``op(*args, **kwargs)`` (``op`` a torch function's dotted name), its error carrying the
    call (``Call``) so a documented limit of that op (``Limit.ops``) can check it is the call the
    limit documents. Probes call an op whose refusal a limit names through this."""
    fn = _resolve(op)
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        setattr(exc, _CALL_ATTRIBUTE, Call(op, args, kwargs))
        raise


def _raised_inside_call(exc: BaseException) -> bool:
    """True when ``exc`` was raised inside ``call``'s own call of the op: ``call``'s frame is on
    its traceback and every frame below it is the install's (or none: a native op)."""
    tb = exc.__traceback__
    below: list[str] | None = None
    while tb is not None:
        if below is not None:
            below.append(tb.tb_frame.f_code.co_filename)
        elif tb.tb_frame.f_code is call.__code__:
            below = []
        tb = tb.tb_next
    return below is not None and all(_package_of(f) is not None for f in below)


def malformed(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What torch's meta registration of ``op`` says against these arguments (the shapes,
    strides and dtypes it documents as a valid call: torch/_meta_registrations.py), or None when
    it takes them (or torch has no meta registration of the op to check them by)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    fn = _resolve(op)
    # fake tensors: the meta registration runs with each tensor's own device, shape, strides and
    # dtype (it checks some things on one device only), and no kernel runs; the fake tensor
    # mode's logger, which logs each meta error it re-raises with its traceback, kept quiet
    quiet = logging.getLogger("torch._subclasses.fake_tensor")
    was = quiet.disabled
    quiet.disabled = True
    try:
        return _meta_says(fn, args, kwargs, FakeTensorMode, torch.Tensor)
    finally:
        quiet.disabled = was


def _meta_says(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], mode_cls: Any, tensor: type
) -> str | None:
    with mode_cls() as mode:

        def fake(x: Any) -> Any:
            return mode.from_tensor(x) if isinstance(x, tensor) else x

        try:
            fn(*[fake(a) for a in args], **{k: fake(v) for k, v in kwargs.items()})
        except NotImplementedError:  # (no meta registration: nothing documented to check against)
            return None
        except Exception as exc:  # noqa: BLE001 - the meta registration's words are the answer
            return describe(exc)
    return None


def _meta_takes(c: Call) -> bool:
    return malformed(c.op, c.args, c.kwargs) is None


@dataclasses.dataclass(frozen=True)
class Limit:
    """A library's check that says no to an input in words ``DECLINING_WORDS`` does not hold:
    ``package`` raised ``kind`` with a message matching ``words`` (for a bare ``assert``, the
    asserting line matching ``line``); ``why`` says where the library documents the limit. A
    ``native`` limit is torch's C++ speaking: the Python frame it surfaces in may be any caller's,
    so it names the ``ops`` it documents and matches only their call (module docstring): the error
    carries its ``Call``, was raised inside it, and ``when`` (if given) accepts its arguments."""

    package: str
    kind: type[BaseException]
    words: str
    why: str
    native: bool = False
    line: str | None = None
    ops: tuple[str, ...] = ()
    when: Callable[[Call], bool] | None = None

    def matches(self, exc: BaseException, package: str | None) -> bool:
        if not isinstance(exc, self.kind) or re.search(self.words, str(exc)) is None:
            return False
        if self.line is not None:
            tb = _innermost(exc)
            source = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None else ""
            if re.search(self.line, source) is None:
                return False
        if self.ops:
            made = getattr(exc, _CALL_ATTRIBUTE, None)
            if made is None and package not in (None, "native"):
                # (the install's own code built the call, torchao's NVFP4 linear calling _scaled_mm on
                # a device without that recipe: its answer, not a malformed call of fp8ref's)
                return self.native or package == self.package
            if not isinstance(made, Call) or made.op not in self.ops or not _raised_inside_call(exc):
                return False
            if self.when is not None and not self.when(made):
                return False
        return self.native or package == self.package


DOCUMENTED_LIMITS = (
    Limit(
        "torch",
        ValueError,
        r"^Invalid scaling configuration",
        "torch's _scaled_mm answers a scaling recipe no kernel of the device implements with these words "
        "(the CPU kernel: tensorwise only before 2.10; the recipes CUDA accepts are listed in its meta "
        "registration, torch/_meta_registrations.py); only a call that registration takes counts",
        native=True,
        ops=("torch._scaled_mm", "torch.nn.functional.scaled_mm"),
        when=_meta_takes,
    ),
    Limit(
        "torch",
        RuntimeError,
        r"^Unknown Complex ScalarType for Float8",
        "c10's toComplexType has no complex counterpart for a float8 dtype (c10/core/ScalarType.h)",
        native=True,
    ),
    Limit(
        "torchao",
        AssertionError,
        r"^$",
        "torchao's emulated MX GEMM takes its second operand column-major only, 'the memory layout we expect "
        "to be required in hardware' (torchao/prototype/mx_formats/mx_tensor.py, a bare assert)",
        line=r"assert b_hp\.t\(\)\.is_contiguous\(\)",
    ),
    Limit(
        "torchao",
        AssertionError,
        r"must be divisible by block_size",
        "torchao's to_mx scales whole blocks only ('TODO(future PR): consider supporting padding', "
        "torchao/prototype/mx_formats/mx_tensor.py); OCP MX v1.0 defines a scale per whole block",
    ),
    Limit(
        "torchao",
        AssertionError,
        r"^Expecting both Float8TrainingTensors to (?:have|be)",
        "torchao's copy_ between two Float8TrainingTensors is allowed only when their properties are equal "
        "('Every other combination is banned', torchao/float8/float8_ops.py, copy_fp8)",
    ),
    Limit(
        "torchao",
        AssertionError,
        r"^Triton kernel requires ",
        "torchao's NVFP4 Triton quantize kernel lists what it takes (swizzled scales, K a multiple of 16, "
        "and before 0.18 a per-tensor scale: torchao/prototype/mx_formats/nvfp4_tensor.py, to_nvfp4)",
    ),
    Limit(
        "torchao",
        AssertionError,
        r"^$",
        "torchao 0.17's NVFP4 GEMM takes per-tensor scales on both operands or on neither, and its activation "
        "quantization gives none (torchao/prototype/mx_formats/nvfp4_tensor.py, a bare assert; 0.18 takes it)",
        line=r"assert b\.per_tensor_scale is None and a\.per_tensor_scale is None",
    ),
    Limit(
        "torchao",
        AssertionError,
        r"^Please install the latest torch nightly build to use MXFP8 training",
        "torchao's MXFP8 training conversion (quantize_ with MXFP8TrainingOpConfig) asserts that this torch has "
        "the DTensor scaled_mm strategies it needs (torchao/prototype/moe_training/conversion_utils.py, "
        "_get_tensor_cls_for_config); torch 2.9.1 lacks them",
    ),
    Limit(
        "torch",
        Exception,
        r"NoValidChoicesError: No choices to select",
        "inductor's GEMM autotuning found no kernel template for this device among the backends it was "
        "allowed (max_autotune_gemm_backends; torch/_inductor/select_algorithm.py)",
    ),
    Limit(
        "torch",
        RuntimeError,
        r"^Error\(s\) in loading state_dict for [\s\S]*Expecting both Float8TrainingTensors to (?:have|be)",
        "load_state_dict gathers each parameter's copy_ error into one message "
        "(torch/nn/modules/module.py): a refusal when the copy_ error inside it is one",
    ),
)

# fp8ref's own needs: the packages fp8ref judges with, never part of the stack under test (numpy:
# reading tensors' bytes, the oracles' arrays; hypothesis: generated inputs; expecttest: torch's op
# catalogue imports it; gfloat and ml_dtypes: the independent oracles). One that is missing here is
# no answer of the install, whoever's import meets it (torchao's MX code imports numpy too): a probe
# that meets it records ``not_measured``, never ``refused:`` or ``fails:``, the golden comparison
# leaves its keys out and a golden is not pinned with them (profiles.golden).
OWN_NEEDS = ("numpy", "hypothesis", "expecttest", "gfloat", "ml_dtypes")
NOT_MEASURED = "not measured here"
# a package of the stack that is installed but fails to import (install.versions): its keys have no
# answer of their own, and profiles.stack_identity leaves them out of a comparison, naming it
DOES_NOT_IMPORT = "installed, does not import"
# torch's words when a tensor is converted to or from numpy without numpy (torch/csrc/utils/tensor_numpy.cpp)
_NUMPY_UNAVAILABLE = re.compile(r"^Numpy is not available|^PyTorch was compiled without NumPy support")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def own_need(exc: BaseException) -> str | None:
    """The package of ``OWN_NEEDS`` that ``exc`` (or the error it was raised from, ``raise ...
    from``) reports missing, when it is not installed here; None otherwise. A package that is
    installed but breaks (a numpy of another ABI, a name it lacks) is no missing need: that error
    is judged as any other."""
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        name = None
        if isinstance(err, ModuleNotFoundError):
            found = _NO_MODULE.search(str(err))
            name = (err.name or (found.group(1) if found else "")).split(".")[0]
        elif isinstance(err, RuntimeError) and _NUMPY_UNAVAILABLE.search(str(err)):
            name = "numpy"
        if name in OWN_NEEDS and _not_installed(name):
            return name
        err = err.__cause__
    return None


def _not_installed(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # (a half-imported module without a spec)
        return False


def unmeasured(exc: BaseException) -> str | None:
    """The value of a key whose probe met ``exc``, when ``exc`` says one of fp8ref's own needs is
    missing here (``own_need``: ``not_measured(package)``); None for any other error."""
    need = own_need(exc)
    return None if need is None else not_measured(need)


def not_measured(package: str) -> str:
    """The profile value of a key whose probe needs ``package``, one of fp8ref's own needs, which is
    not installed here: what is missing and how to install it."""
    if package not in OWN_NEEDS:
        raise ValueError(f"package: expected one of fp8ref's own needs {OWN_NEEDS}, got {package!r}")
    return f"{NOT_MEASURED}: fp8ref needs {package}, which is not installed (pip install 'fp8ref[test]')"


# Messages of errors that break the CUDA context (CUDA runtime error strings as torch reports them).
DEVICE_FAULTS = re.compile(
    r"illegal memory access|misaligned address|unspecified launch failure|device-side assert"
    r"|illegal instruction|CUDA error: an illegal",
    re.IGNORECASE,
)

_MISSING_MODULE_ATTRIBUTE = re.compile(r"^module '(\w+)(?:\.\w+)*' has no attribute ")


@functools.lru_cache(maxsize=4096)  # (a refusal is classified by its frames' files: the same few)
def _package_of(filename: str) -> str | None:
    """The top-level package a source file belongs to, when it is one of INSTALL_PACKAGES."""
    parts = Path(filename).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in INSTALL_PACKAGES and i + 1 < len(parts):
            # .../site-packages/torch/nn/functional.py -> torch; guard against a user's folder
            # that happens to be named torch by asking for a package marker next to it
            root = Path(*parts[: i + 1])
            if (root / "__init__.py").is_file():
                return parts[i]
    return None


def _innermost(exc: BaseException) -> TracebackType | None:
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _is_raise_statement(filename: str, lineno: int) -> bool:
    line = linecache.getline(filename, lineno).lstrip()
    return line.startswith(("raise", "assert"))


def raised_by_install(exc: BaseException) -> str | None:
    """The install package that raised ``exc`` (``'native'`` for a native function called from
    another file's line), or None when the caller raised it (module docstring, "Where")."""
    tb = _innermost(exc)
    if tb is None:  # never raised (constructed by hand): nobody refused anything
        return None
    filename = tb.tb_frame.f_code.co_filename
    package = _package_of(filename)
    if package is not None:
        return package
    if _is_raise_statement(filename, tb.tb_lineno):
        return None  # fp8ref's, or a caller's, own raise or assert
    if isinstance(exc, ImportError):  # the import system, for a module of the install only
        return "native" if str(exc.name or "").split(".")[0] in INSTALL_PACKAGES else None
    if isinstance(exc, AttributeError):
        found = _MISSING_MODULE_ATTRIBUTE.match(str(exc))
        return "native" if found and found.group(1) in INSTALL_PACKAGES else None
    if isinstance(exc, NATIVE_ERRORS) and not _PYTHON_WORDS.search(str(exc)):
        return "native"
    return None


def _compiler_error(exc: BaseException) -> bool:
    return any(cls.__name__ in _COMPILER_ERRORS for cls in type(exc).__mro__)


def declined(exc: BaseException, package: str | None = None) -> str | None:
    """Why ``exc``'s words say no to an input (module docstring, "What"), or None."""
    if isinstance(exc, NotImplementedError):
        return "NotImplementedError"
    if isinstance(exc, ImportError):
        return "the install lacks the module or name"
    if isinstance(exc, AttributeError):
        found = _MISSING_MODULE_ATTRIBUTE.match(str(exc))
        return "the install lacks the function or dtype" if found and found.group(1) in INSTALL_PACKAGES else None
    text = str(exc)
    if DECLINING_WORDS.search(text) and not _PYTHON_WORDS.search(text) and not _compiler_error(exc):
        return "the library's words for an input it does not handle"
    limit = next((lim for lim in DOCUMENTED_LIMITS if lim.matches(exc, package)), None)
    return limit.why if limit is not None else None


def is_refusal(exc: BaseException) -> bool:
    """True when ``exc`` is the install refusing an input (see the module docstring)."""
    if not isinstance(exc, Exception) or isinstance(exc, MemoryError):
        return False
    if DEVICE_FAULTS.search(str(exc)):
        return False  # the device broke: a failure, and what follows it is not to be trusted
    if own_need(exc) is not None:
        return False  # fp8ref's own package missing: no answer of the install (attempt says which)
    package = raised_by_install(exc)
    if _caller_fault(exc, package):
        return False  # a malformed call: the caller's own mistake
    return package is not None and declined(exc, package) is not None


def _caller_fault(exc: BaseException, package: str | None) -> bool:
    """A native function rejected the call its caller's line built as malformed (``CALL_FAULTS``).
    The same words raised inside the install's own Python (torch's svd_lowrank multiplying a
    float8 input by the float32 matrix it made) are the install's doing, judged as any other."""
    return package == "native" and CALL_FAULTS.search(str(exc)) is not None


def op_declines(exc: BaseException) -> bool:
    """For a survey of torch's own ops on float8 inputs (``fp8ref.harness.native``: the op
    catalogue's samples, Python scalars in arithmetic, the promotion table, the ways of writing a
    value): True when ``exc`` is torch declining one. Each input is valid for the op in float32
    (the catalogue lists it so) and only its dtype is float8, and which ops take float8 is what
    the survey finds out, so whatever torch raises for it, in its own frames or natively from the
    call, is the op declining that dtype; what fp8ref's own frames raise (building the sample, a
    typo) is a failure, and so is a call rejected as malformed on fp8ref's own line (``CALL_FAULTS``:
    shapes that do not multiply, a view of the wrong size, a value of another dtype than the
    destination's), which no input's dtype explains. Device faults and non-``Exception`` errors never count."""
    if not isinstance(exc, Exception) or isinstance(exc, MemoryError) or DEVICE_FAULTS.search(str(exc)):
        return False
    package = raised_by_install(exc)  # (walks the traceback: once; a survey classifies some 20,000)
    if own_need(exc) is not None or _caller_fault(exc, package):
        return False
    return package is not None  # (is_refusal adds nothing: it, too, needs the install's frames)


def survey(fn: Callable[[], Any], device: str | None = None) -> tuple[bool, Any]:
    """``(True, fn())``, or ``(False, exc)`` when torch declines a float8 input of its own op
    (``op_declines``); anything else (fp8ref's own error, a wrong call, a device fault, which a
    CUDA ``device`` is synchronized for) propagates."""
    try:
        out = fn()
        if device is not None and str(device).startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)
        return True, out
    except Exception as exc:  # noqa: BLE001 - classified by the one rule; the rest re-raised
        if not op_declines(exc):
            raise
        return False, exc


def first_words(exc: BaseException, limit: int) -> str:
    """``Type: first line of the message`` cut at ``limit`` characters, as the native op
    surveys record a refusal."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:limit]}"


def import_refusal(module: str, names: tuple[str, ...] = ()) -> str | None:
    """None when ``from module import *names`` works here, else ``refused: Type: message``: a
    module of the install that fails to import, whatever its error says, is a module the install
    does not offer with these versions (a torchao built for another torch raises anything from
    ImportError to AttributeError to RuntimeError while it loads). An error whose innermost frame
    is not the install's (fp8ref's own) propagates."""
    import importlib

    try:
        loaded = importlib.import_module(module)
        for name in names:
            getattr(loaded, name)
    except Exception as exc:  # noqa: BLE001 - classified below; the rest re-raised
        value = unmeasured(exc)
        if value is not None:
            return value
        if raised_by_install(exc) is None and not isinstance(exc, AttributeError):
            raise
        return f"refused: {describe(exc)}"
    return None


def normalize(message: str) -> str:
    """The first line of an install's error message without what varies between builds of the
    same behaviour (source paths and line numbers, torch's assert boilerplate), at most 240 chars."""
    lines = message.strip().splitlines()
    first = lines[0].strip() if lines else ""
    first = re.sub(r' at "[^"]*":\d+,?', "", first)
    first = first.replace(" please report a bug to PyTorch.", "").replace(" INTERNAL ASSERT FAILED", " failed:")
    first = re.sub(r" \((?:/|[A-Za-z]:\\)[^()]*\)$", "", first)  # "(/path/to/module.py)" after an ImportError
    return first if len(first) <= 240 else first[:237] + "..."


def describe(exc: BaseException) -> str:
    """``Type: message`` (``normalize``d), for a profile value or a skip reason; for an error
    without words (a bare ``assert``), the line that raised it."""
    first = normalize(str(exc))
    if first:
        return f"{type(exc).__name__}: {first}"
    tb = _innermost(exc)
    line = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip() if tb is not None else ""
    return f"{type(exc).__name__} at `{line}`" if line else type(exc).__name__


def refusal(exc: BaseException) -> str | None:
    """``'refused: Type: message'`` when ``exc`` is a refusal, else None."""
    return f"refused: {describe(exc)}" if is_refusal(exc) else None


def attempt(fn: Callable[[], T], device: str | None = None) -> tuple[bool, T | str]:
    """Call ``fn()``, the smallest call that answers a capability question. ``(True, result)``
    on success, ``(False, 'refused: ...')`` when the install refuses, ``(False, 'not measured
    here: ...')`` when one of fp8ref's own needs is missing (``own_need``); any other exception (a
    failure, a device fault) propagates unchanged. With a CUDA ``device`` the call is
    synchronized before it counts as a success, so an asynchronous fault surfaces here, in the
    call that caused it."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable taking no arguments, got {type(fn).__name__}")
    try:
        result = fn()
        if device is not None and str(device).startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)
        return True, result
    except Exception as exc:  # noqa: BLE001 - classified below; non-refusals re-raised
        value = unmeasured(exc)
        if value is not None:  # (no answer of the install: the caller skips or records it as not measured)
            return False, value
        text = refusal(exc)
        if text is None:
            raise
        return False, text


def observe(fn: Callable[[], T], device: str | None = None) -> tuple[bool, T | str]:
    """``attempt`` for the behaviour profile, which records what the install does rather than
    judging it: ``(False, 'refused: ...')`` for a refusal, ``(False, 'fails: Type: message')``
    when the install fails on the input in other words, raised inside one of its packages (a
    library's assertion, a ``torch._check`` in torch's Python code, on an input it supports), so the
    profile still holds every other key and the golden comparison names this one. Everything else
    propagates, as from ``attempt``: fp8ref's own errors, device faults, and an error a native
    function raised on fp8ref's line in other words (it cannot be told from fp8ref's own mistake)."""
    try:
        return attempt(fn, device)
    except Exception as exc:  # noqa: BLE001 - what attempt re-raised: the install's failures recorded
        if DEVICE_FAULTS.search(str(exc)) or isinstance(exc, MemoryError) or raised_by_install(exc) in (None, "native"):
            raise
        return False, f"fails: {describe(exc)}"
