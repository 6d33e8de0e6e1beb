"""torch's native float8 ops, discovered from torch itself: which run on each float8 dtype, and
what they give on every code.

The catalogue is torch's own OpInfo database (``op_db`` in
``torch.testing._internal.common_methods_invocations``, which needs the ``expecttest`` package):
the list torch's ``test_ops.py::test_dtypes`` holds every op's claimed dtypes against. An op's
float32 sample inputs become a float8 dtype's by giving each floating tensor in them the same
shape and strides filled with codes, every code in turn from a start that differs per tensor (so
NaN payloads, -0, the FNUZ NaN 0x80 and E8M0's 0x00 and 0xFF are among them), and a float dtype
argument (``dtype=torch.float32`` of a factory) the float8 dtype. The same sample with uint8
tensors holding the same codes is the op's "uint8 view".

``outcome`` runs an op's first samples on one dtype: ``runs``, ``refused`` (the first sample
refused: fp8ref.harness.stack.refusals), ``partial`` (some ran, a later one was refused: a finding, the
op runs but not on every input), or ``n/a`` (no sample puts the dtype into the op). The support
matrix (``support_matrix``) is the profile's ``native.<op>`` keys; what each op that runs is
checked against is ``native_op_kinds``' table.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...reference.codec import decode
from ...reference.formats import FloatFormat
from ..stack import probes
from ..stack.refusals import survey

__all__ = [
    "SAMPLES",
    "catalogue_refusal",
    "catalogue",
    "Sample",
    "samples",
    "outcome",
    "support_matrix",
    "matrix_word",
    "quiet",
]

SAMPLES = 3  # samples per op and dtype: enough to see an op that refuses some of its inputs


@functools.cache
def _op_db() -> tuple[Any, ...] | str:
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as exc:  # noqa: BLE001 - expecttest missing, or a torch whose test tree moved
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return tuple(op_db)


def catalogue_refusal() -> str | None:
    """None when torch's op catalogue imports here, else why not (``refused: ...``)."""
    db = _op_db()
    return db if isinstance(db, str) else None


def catalogue() -> dict[str, Any]:
    """torch's OpInfos by name (the first of a name; variants share the name's row); empty when
    the catalogue does not import (``catalogue_refusal`` says why)."""
    db = _op_db()
    if isinstance(db, str):
        return {}
    out: dict[str, Any] = {}
    for op in db:
        name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        out.setdefault(name, op)
    return out


class Sample:
    """One sample input, three ways: with float8 tensors of codes (``call``), with uint8 tensors
    holding the same codes (``call_uint8``, "the uint8 view") and with float64 tensors holding
    the codes' values by the definition (``call_float64``; a float dtype argument float64 too)."""

    def __init__(self, ways: dict[str, tuple[Any, tuple, dict]], codes: list[torch.Tensor]):
        self.ways = ways
        self.codes = codes  # the codes of each float8 tensor in the sample, in order

    def _call(self, way: str, fn: Callable[..., Any]) -> Any:
        inp, args, kwargs = self.ways[way]
        return fn(inp, *args, **kwargs)

    def call(self, fn: Callable[..., Any]) -> Any:
        return self._call("float8", fn)

    def call_uint8(self, fn: Callable[..., Any]) -> Any:
        return self._call("uint8", fn)

    def call_float64(self, fn: Callable[..., Any]) -> Any:
        return self._call("float64", fn)


# The order codes are handed out in: the ones each format treats specially first (zeros of both
# signs, the NaNs of FN and FNUZ formats, +-max of E4M3FN, the smallest subnormals, E8M0's 0x00
# and 0xFF), so a tensor of a few elements holds them, then every other code.
_SPECIAL = (0x00, 0x80, 0x7F, 0xFF, 0x01, 0x81, 0x7E, 0xFE, 0x7C, 0xFC, 0x3F, 0xBF, 0x40, 0xC0, 0x08, 0x88)
_ORDER = torch.tensor([*_SPECIAL, *(c for c in range(256) if c not in _SPECIAL)], dtype=torch.uint8)


def _codes_like(t: torch.Tensor, start: int) -> torch.Tensor:
    """uint8 codes laid out as ``t`` is: its shape, strides and storage offset in a storage of
    its storage's size (a view of a larger tensor stays one), every code in turn (``_ORDER``)
    from ``start``."""
    size = t.untyped_storage().nbytes() // t.element_size()
    base = _order_run(size + 256)[start % 256 : start % 256 + size].to(t.device)  # (a copy of its own)
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


@functools.cache
def _cached_run(n: int) -> torch.Tensor:
    return _ORDER.repeat(n // 256)


def _order_run(n: int) -> torch.Tensor:
    """``_ORDER`` repeated to at least ``n`` codes (cached by powers of two), to slice from."""
    blocks = 1 << max(0, (n - 1) // 256).bit_length()
    run = _cached_run(256 * blocks)
    return run[: max(n, 0)].clone()


def _three_ways(codes: torch.Tensor, fmt: FloatFormat, wide: bool = True) -> dict[str, torch.Tensor]:
    dtype = fmt.torch_dtype()
    assert dtype is not None
    if not wide:  # (the support matrix runs the float8 way alone)
        return {"float8": codes.view(dtype), "uint8": codes, "float64": codes}
    size = codes.untyped_storage().nbytes()
    whole = codes.as_strided((size,), (1,), 0)
    values = decode(whole.contiguous(), fmt).double().as_strided(codes.shape, codes.stride(), codes.storage_offset())
    return {"float8": codes.view(dtype), "uint8": codes, "float64": values}


def _is_elementwise(op: Any) -> bool:
    """Whether torch catalogues ``op`` as an elementwise (unary or binary) ufunc."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    return isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo))


def _every_code_samples(op: Any, fmt: FloatFormat, device: str) -> list[Sample]:
    """For torch's elementwise ops (its Unary/BinaryUfuncInfo): every code (unary) or every pair
    of codes (binary: 65,536), in one tensor (torch's vectorized path) and in tensors of 32 (its
    scalar path, taken below 64 elements on the CPU)."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    if not _is_elementwise(op) or not _takes_ufunc_form(op, device):
        return []
    codes = torch.arange(256, device=device).to(torch.uint8)
    inputs: list[tuple[torch.Tensor, ...]]
    if isinstance(op, UnaryUfuncInfo):
        inputs = [(codes[i : i + n],) for i, n in [(0, 256)] + [(j, 32) for j in range(0, 256, 32)]]
    elif isinstance(op, BinaryUfuncInfo):
        a, b = codes.repeat_interleave(256), codes.repeat(256)
        special = torch.tensor([0x00, 0x80, 0x7F, 0xFF, 0x01, 0x81, 0x7E, 0xFE], device=device).to(torch.uint8)
        sa, sb = special.repeat_interleave(8)[:32], special.repeat(8)[:32]
        inputs = [(a, b), (sa, sb)]
    out = []
    for args in inputs:
        ways = [_three_ways(c, fmt) for c in args]
        out.append(Sample({w: (ways[0][w], tuple(x[w] for x in ways[1:]), {}) for w in _WAYS}, list(args)))
    return out


def _takes_ufunc_form(op: Any, device: str) -> bool:
    """Whether ``op`` runs as ``op(x)`` (unary) or ``op(x, y)`` (binary) on float32 tensors: some
    catalogued elementwise ops need more (``fill`` a value), and their every-code form is no call
    of theirs."""
    from torch.testing._internal.opinfo.core import UnaryUfuncInfo

    args = [torch.ones(4, device=device)] * (1 if isinstance(op, UnaryUfuncInfo) else 2)
    try:
        op.op(*args)
    except (TypeError, RuntimeError):  # (float32, the catalogue's own dtype: not this op's form)
        return False
    return True


def _is_float8(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point and t.element_size() == 1


def _ways(
    value: Any,
    fmt: FloatFormat,
    counter: Iterator[int],
    codes: list[torch.Tensor],
    shift: int = 0,
    wide: bool = True,
    only_float8: bool = False,
) -> dict[str, Any] | None:
    """The float8, uint8 and float64 versions of one argument; None when it holds no float (or,
    with ``only_float8``, no float8 tensor)."""
    if (
        isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and not value.is_complex()
        and (_is_float8(value) or not only_float8)
    ):
        c = _codes_like(value, shift + 37 * next(counter))
        codes.append(c)
        return _three_ways(c, fmt, wide)
    if isinstance(value, torch.dtype) and value.is_floating_point and not value.is_complex:
        return {"float8": fmt.torch_dtype(), "uint8": torch.uint8, "float64": torch.float64}
    if isinstance(value, (list, tuple)):
        parts = [_ways(v, fmt, counter, codes, shift, wide, only_float8) for v in value]
        if all(p is None for p in parts):
            return None
        kind = type(value)
        return {w: kind(v if p is None else p[w] for v, p in zip(value, parts)) for w in _WAYS}
    return None


_WAYS = ("float8", "uint8", "float64")


def _float32_samples(op: Any, device: str, limit: int) -> list[Any]:
    """The op's first ``limit`` float32 samples, from its own sample function under a fixed seed
    (as OpInfo.sample_inputs seeds them), without the tracking iterator around it: that one
    walks the whole call stack (inspect.stack) for every sample, seconds per op inside pytest."""
    make = getattr(op, "sample_inputs_func", None)
    state = torch.get_rng_state()  # (the caller's random state is given back)
    torch.default_generator.manual_seed(0)
    try:
        if make is None:
            return list(itertools.islice(op.sample_inputs(device, torch.float32), limit))
        return list(itertools.islice(make(op, device, torch.float32, False), limit))
    finally:
        torch.set_rng_state(state)


def samples(
    op: Any,
    fmt: FloatFormat,
    device: str = "cpu",
    limit: int = SAMPLES,
    made: list | None = None,
    every_code: bool = False,
    wide: bool = True,
) -> list[Sample]:
    """The first ``limit`` float32 samples of ``op`` (or ``made``, made before) turned into
    ``fmt``'s codes three ways (``Sample``; module docstring); those that put no float8 tensor or
    dtype into the op are left out. ``every_code``: for an elementwise op, every code or pair of
    codes too (``_every_code_samples``), for another one each sample again with its codes moved
    along until a small one has held every code (at most ``_PASSES`` times). ``wide=False``:
    without the float64 way (whose decode the support matrix does not need)."""
    out: list[Sample] = []
    ufunc = every_code and _is_elementwise(op)
    for s in made if made is not None else _float32_samples(op, device, limit):
        smallest = min((t.numel() for t in _floats(s)), default=0)
        passes = min(_PASSES, -(-256 // smallest)) if every_code and not ufunc and smallest else 1
        for shift in range(0, passes * smallest or 1, smallest or 1):
            sample = _sample(s, fmt, shift, wide)
            if sample is not None:
                out.append(sample)
    return out + (_every_code_samples(op, fmt, device) if every_code else [])


_PASSES = 16  # at most, per sample: a small sample passes its codes along until all 256 appeared


def _floats(s: Any) -> list[torch.Tensor]:
    items = [s.input, *s.args, *s.kwargs.values()]
    flat = [t for v in items for t in (v if isinstance(v, (list, tuple)) else [v])]
    return [t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point() and not t.is_complex()]


def _sample(s: Any, fmt: FloatFormat, shift: int, wide: bool = True) -> Sample | None:
    """One float32 sample in ``fmt``'s codes three ways, its codes moved along by ``shift``. A
    sample that already holds float8 tensors (a scaled GEMM's: float8 operands, float32 scales)
    gets ``fmt``'s codes in those alone; its other floating tensors are arguments of their own
    dtype (a scale stays float32)."""
    counter = itertools.count()
    codes: list[torch.Tensor] = []
    only = any(_is_float8(t) for t in _floats(s))
    inp = _ways(s.input, fmt, counter, codes, shift, wide, only)
    args = _ways(tuple(s.args), fmt, counter, codes, shift, wide, only)
    kw = {k: _ways(v, fmt, counter, codes, shift, wide, only) for k, v in s.kwargs.items()}
    if inp is None and args is None and all(v is None for v in kw.values()):
        return None
    ways = {
        w: (
            s.input if inp is None else inp[w],
            tuple(s.args) if args is None else args[w],
            {k: s.kwargs[k] if v is None else v[w] for k, v in kw.items()},
        )
        for w in _WAYS
    }
    return Sample(ways, codes)


def outcome(op: Any, fmt: FloatFormat, device: str = "cpu", made: list | None = None) -> str:
    """``runs``, ``refused``, ``partial`` or ``n/a`` (module docstring) for ``op`` on ``fmt``
    (``made``: its float32 samples, made once for every format)."""
    ok, converted = survey(lambda: samples(op, fmt, device, made=made, wide=False), device)
    if not ok or not converted:
        return "n/a"
    assert isinstance(converted, list)
    ran = 0
    for sample in converted:
        ok, _ = survey(functools.partial(sample.call, op.op), device)
        if not ok:
            return "partial" if ran else "refused"
        ran += 1
    return "runs"


def matrix_word(row: dict[str, str]) -> str:
    """One op's outcomes over the float8 formats as one profile value: ``all run``, ``all
    refused``, ``n/a``, or ``e4m3fn=runs e5m2=refused ...`` when they differ."""
    values = set(row.values())
    if len(values) == 1:
        (only,) = values
        return {"runs": "all run", "refused": "all refused"}.get(only, only)
    return " ".join(f"{name}={word}" for name, word in row.items())


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Warnings silenced: running every catalogued op on its samples sets off torch's deprecation
    notes (torch.cholesky, torch.lu, ...) about ops fp8ref only enumerates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def support_matrix(device: str = "cpu") -> dict[str, dict[str, str]]:
    """Every catalogued op's ``outcome`` on every float8 format (op name -> format name -> outcome);
    empty when the catalogue does not import. Found once per process and device (a copy each
    call): the profile and the tests ask for the same matrix."""
    return {name: dict(row) for name, row in _cached_matrix(str(device)).items()}


@functools.cache
def _cached_matrix(device: str) -> dict[str, dict[str, str]]:
    with quiet():
        return _support_matrix(device)


def _support_matrix(device: str) -> dict[str, dict[str, str]]:
    formats = probes.float8_formats()
    out = {}
    for name, op in catalogue().items():
        ok, made = survey(functools.partial(_float32_samples, op, device, SAMPLES), device)
        out[name] = {f.name: outcome(op, f, device, made) if ok and isinstance(made, list) else "n/a" for f in formats}
    return out
