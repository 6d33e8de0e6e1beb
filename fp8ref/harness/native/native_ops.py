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

``judge`` runs an op's first ``JUDGED`` samples on one dtype, contiguous, and then, for an op
the kinds table checks, each other memory layout (``layouts``) on the first sample that ran in
it: ``runs``, ``refused`` (no sample ran: fp8ref.harness.stack.refusals decides a refusal),
``partial`` (some samples or layouts ran, others were refused: both named; a finding, the op runs
but not on every input) or ``n/a`` (no sample puts the dtype into the op, or it ran only on
empty tensors, which shows nothing running). A sample holding a sparse tensor gets no codes.
An op is judged by all its samples, not its first: ``mul``'s first ones broadcast against a 0-d
tensor, which the CPU kernel refuses, while two tensors of one shape multiply. The support matrix
(``support_matrix``) is the profile's ``native.<op>`` keys; what each op that runs is checked
against is ``native_op_kinds``' table, on the samples ``judge`` says ran.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import warnings
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ...reference.codec import decode
from ...reference.formats import FloatFormat
from ..stack import probes
from ..stack.refusals import DEVICE_FAULTS, first_words, raised_by_install, survey, unmeasured
from .layouts import LAYOUTS, relaid
from .native_op_kinds import KINDS, kind_of
from .short_stack import call_on_a_short_stack

__all__ = [
    "SAMPLES",
    "catalogue_refusal",
    "catalogue",
    "Sample",
    "samples",
    "outcome",
    "Outcome",
    "judge",
    "judged_samples",
    "JUDGED",
    "support_matrix",
    "judgements",
    "matrix_word",
    "quiet",
]

JUDGED = 16  # catalogue samples per op and dtype an op's outcome is judged on (mul's first same-shape pair is its 6th)
SAMPLES = 3  # of those that run, the ones every code is checked on (with one per other layout)


@functools.cache
def _op_db() -> tuple[Any, ...] | str:
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as exc:  # noqa: BLE001 - expecttest missing, or a torch whose test tree moved
        value = unmeasured(exc)  # (expecttest, numpy: fp8ref's own needs, never the install's refusal)
        if value is not None:
            return value
        if isinstance(exc, ModuleNotFoundError) and str(exc.name or "").startswith("torch.testing"):
            # (a torch installed without its test tree: the catalogue is not there, nothing refused)
            return f"missing: torch {torch.__version__} is installed without its op catalogue ({exc.name})"
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return tuple(op_db)


def catalogue_refusal() -> str | None:
    """None when torch's op catalogue imports here, else why not: ``missing: ...`` (this torch was
    installed without it), ``not measured here: ...`` (fp8ref's own need, expecttest, is not
    installed) or ``refused: ...`` (it fails to load)."""
    db = _op_db()
    return db if isinstance(db, str) else None


def catalogue() -> Mapping[str, Any]:
    """torch's OpInfos by name (the first of a name; variants share the name's row); empty when
    the catalogue does not import (``catalogue_refusal`` says why). Built once per catalogue and
    read-only: the survey and each check look an op up by name, some 300 times a run, and each
    build reads 1,100 OpInfos' names through OpInfo's own ``__getattribute__`` (0.15 s a run)."""
    global _BY_NAME
    db = _op_db()
    if isinstance(db, str):
        return MappingProxyType({})
    if _BY_NAME is None or _BY_NAME[0] is not db:  # (a new catalogue: _op_db's cache cleared)
        out: dict[str, Any] = {}
        for op in db:
            out.setdefault(_name(op), op)
        _BY_NAME = (db, MappingProxyType(out))
    return _BY_NAME[1]


_BY_NAME: tuple[tuple[Any, ...], Mapping[str, Any]] | None = None


def _name(op: Any) -> str:
    """An OpInfo's name in the catalogue: its op's, with its variant's after a dot."""
    variant = getattr(op, "variant_test_name", "")
    return op.name + (f".{variant}" if variant else "")


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


def _info_kind(op: Any) -> str | None:
    """``unary`` or ``binary`` when torch catalogues ``op`` as an elementwise ufunc (its
    UnaryUfuncInfo or BinaryUfuncInfo, told by class name: importing torch's OpInfo classes needs
    expecttest, and a stand-in op is none of them), else None."""
    names = {c.__name__ for c in type(op).__mro__}
    return "unary" if "UnaryUfuncInfo" in names else "binary" if "BinaryUfuncInfo" in names else None


def _is_elementwise(op: Any) -> bool:
    """Whether torch catalogues ``op`` as an elementwise (unary or binary) ufunc."""
    return _info_kind(op) is not None


def _every_code_samples(op: Any, fmt: FloatFormat, device: str) -> list[Sample]:
    """For torch's elementwise ops (its Unary/BinaryUfuncInfo): every code (unary) or every pair
    of codes (binary: 65,536), in one tensor (torch's vectorized path) and in tensors of 32 (its
    scalar path, taken below 64 elements on the CPU)."""
    if not _is_elementwise(op) or not _takes_ufunc_form(op, device):
        return []
    codes = torch.arange(256, device=device).to(torch.uint8)
    inputs: list[tuple[torch.Tensor, ...]]
    if _info_kind(op) == "unary":
        inputs = [(codes[i : i + n],) for i, n in [(0, 256)] + [(j, 32) for j in range(0, 256, 32)]]
    elif _info_kind(op) == "binary":
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
    args = [torch.ones(4, device=device)] * (1 if _info_kind(op) == "unary" else 2)
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
    ufunc_too: bool = True,
) -> list[Sample]:
    """The first ``limit`` float32 samples of ``op`` (or ``made``, made before) turned into
    ``fmt``'s codes three ways (``Sample``; module docstring); those that put no float8 tensor or
    dtype into the op are left out. ``every_code``: for an elementwise op, every code or pair of
    codes too (``_every_code_samples``), for another one each sample again with its codes moved
    along until a small one has held every code (at most ``_PASSES`` times). ``wide=False``:
    without the float64 way (whose decode the support matrix does not need). ``ufunc_too=False``:
    without an elementwise op's every-code samples (the caller adds them once)."""
    out: list[Sample] = []
    ufunc = every_code and _is_elementwise(op)
    for s in made if made is not None else _float32_samples(op, device, limit):
        smallest = min((t.numel() for t in _floats(s)), default=0)
        passes = min(_PASSES, -(-256 // smallest)) if every_code and not ufunc and smallest else 1
        for shift in range(0, passes * smallest or 1, smallest or 1):
            sample = _sample(s, fmt, shift, wide)
            if sample is not None:
                out.append(sample)
    return out + (_every_code_samples(op, fmt, device) if every_code and ufunc_too else [])


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
    if any(t.layout != torch.strided for t in _floats(s)):
        return None  # (a sparse or nested tensor: codes are laid out in strided tensors only)
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


@dataclasses.dataclass
class Outcome:
    """What one op did on one float8 dtype over its judged samples (``JUDGED``) and layouts.

    ``word``: ``runs`` (every sample and layout it was given ran), ``partial`` (some ran, some
    were refused: both named), ``refused`` (none ran) or ``n/a``. ``ran`` and ``refused`` name
    the samples (``sample 5 (5, 10, 5) (5, 10, 5)``, ``... transposed``); ``why``: the install's
    words for the first refusal. ``checked``: the samples the checks take, by catalogue index and
    layout: the first ``SAMPLES`` that ran contiguous, and per other layout the first that ran
    in it. A run with an empty float8 input, or only empty float8 outputs, does not show that an
    op runs (a kernel returns an empty result before it looks at the dtype): a refusal of such a
    sample counts, a run does not; an op that ran on nothing else is ``n/a`` (``why`` says so).
    A layout is judged on the first sample that ran in it (one per layout)."""

    word: str
    ran: list[str] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)
    why: str = ""
    checked: list[tuple[int, str]] = dataclasses.field(default_factory=list)

    def named(self) -> str:
        """The samples that ran and those refused, for a ``partial`` op's account."""
        shown = 3
        ran = ", ".join(self.ran[:shown]) + (f" (+{len(self.ran) - shown})" if len(self.ran) > shown else "")
        ref = ", ".join(self.refused[:shown]) + (
            f" (+{len(self.refused) - shown})" if len(self.refused) > shown else ""
        )
        return f"runs on {ran}; refused on {ref}: {self.why}"


def _shapes(sample: Sample) -> str:
    return " ".join(str(tuple(c.shape)) for c in sample.codes) or "(a dtype argument)"


def _degenerate(sample: Sample, got: Any) -> bool:
    """Whether a run shows nothing running: a float8 input is empty, or the op wrote float8 and
    every float8 output is empty (``eye(0, n)``, ``logspace`` of no steps)."""
    outputs = [t for t in tree_flatten(got)[0] if isinstance(t, torch.Tensor) and _is_float8(t)]
    return any(c.numel() == 0 for c in sample.codes) or (bool(outputs) and all(t.numel() == 0 for t in outputs))


def _as_format(sample: Sample, fmt: FloatFormat) -> Sample:
    """``sample``'s float8 way (made for another float8 format) with its codes read as ``fmt``'s:
    the same bytes (``_codes_like`` hands out codes whatever the format), made once per sample."""
    dtype = fmt.torch_dtype()

    def swap(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and _is_float8(v):
            return v.view(torch.uint8).view(dtype)
        if isinstance(v, torch.dtype) and v.is_floating_point and v.itemsize == 1:
            return dtype
        if isinstance(v, (list, tuple)):
            return type(v)(swap(x) for x in v)
        return v

    inp, args, kwargs = sample.ways["float8"]
    return Sample({"float8": (swap(inp), swap(args), {k: swap(v) for k, v in kwargs.items()})}, sample.codes)


def _try(op: Any, fmt: FloatFormat, device: str, s: Any, key: Any, memo: dict) -> tuple[Sample | None, bool, str, Any]:
    """``s`` (a float32 sample) in ``fmt``'s codes and run: (the sample or None when it puts no
    float8 into the op, whether it ran, the refusal's words, what it gave). ``memo[key]``: ``s``
    in codes, converted for the first format asked and read as each other's. Making the codes is
    fp8ref's work, not the install's: what it raises propagates."""
    if key not in memo:
        converted = samples(op, fmt, device, made=[s], wide=False)
        memo[key] = converted[0] if converted else None
    if memo[key] is None:
        return None, False, "", None
    sample = _as_format(memo[key], fmt)
    ok, got = survey(functools.partial(sample.call, op.op), device)
    return sample, ok, "" if ok else first_words(got, 160), got if ok else None


def _relaid_float32(op: Any, made: list, i: int, layout: str, device: str, memo: dict) -> Any | None:
    """Sample ``i`` in ``layout`` when the op runs on it in float32, its catalogue's own dtype
    (``view`` of a transposed tensor fails in every dtype: no input of the op, not a refusal of
    float8), else None. ``memo``: the answers, shared by the formats."""
    if (i, layout) not in memo:
        s = relaid(made[i], layout)
        ok = s is not None and _runs_in_float32(lambda: op.op(s.input, *s.args, **s.kwargs), device)
        memo[i, layout] = s if ok else None
    return memo[i, layout]


def _runs_in_float32(fn: Callable[[], Any], device: str) -> bool:
    """Whether a float32 sample runs: torch rejecting it in any words, a malformed call's too (a
    view of a transposed tensor), means the layout is no input of the op (the question asked
    here); an error of fp8ref's own frames propagates."""
    try:
        return survey(fn, device)[0]
    except Exception as exc:  # noqa: BLE001 - the install's answer is no; fp8ref's own error re-raised
        if raised_by_install(exc) is None or isinstance(exc, MemoryError) or DEVICE_FAULTS.search(str(exc)):
            raise  # (fp8ref's own error; a device fault, after which nothing is to be trusted)
        return False


def judge(
    op: Any, fmt: FloatFormat, device: str = "cpu", made: list | None = None, memo: dict | None = None
) -> Outcome:
    """``op`` on ``fmt`` (``Outcome``): every judged sample contiguous, then each other layout
    (``layouts.LAYOUTS``) on the samples that ran, until one in that layout ran or all were
    refused (``made``: the op's float32 samples; ``memo``: which of them run in each layout in
    float32, and each in codes; both made once for every format)."""
    made = made if made is not None else _float32_samples(op, device, JUDGED)
    memo = memo if memo is not None else {}
    out = Outcome("n/a")
    ran_at: list[int] = []
    empty_ran: list[str] = []
    for i, s in enumerate(made):
        sample, ok, why, got = _try(op, fmt, device, s, ("codes", i, "contiguous"), memo)
        if sample is None:
            continue
        name = f"sample {i} {_shapes(sample)}"
        if not ok:
            out.refused.append(name)
            out.why = out.why or why
        elif _degenerate(sample, got):
            empty_ran.append(name)
        else:
            out.ran.append(name)
            ran_at.append(i)
    if empty_ran and not out.ran and not out.refused:  # (nothing shown running: no word on the op)
        out.why = f"ran only on empty tensors ({', '.join(empty_ran[:3])})"
    for layout in LAYOUTS[1:] if kind_of(_name(op)) in KINDS else ():  # (what is checked is judged in each)
        for i in ran_at:
            s = _relaid_float32(op, made, i, layout, device, memo)
            if s is None:
                continue
            sample, ok, why, _ = _try(op, fmt, device, s, ("codes", i, layout), memo)
            if sample is None:
                continue
            name = f"sample {i} {layout}"
            if ok:
                out.ran.append(name)
                out.checked.append((i, layout))
                break
            out.refused.append(name)
            out.why = out.why or why
    out.checked[:0] = [(i, "contiguous") for i in ran_at[:SAMPLES]]
    out.word = "partial" if out.ran and out.refused else "runs" if out.ran else "refused" if out.refused else "n/a"
    return out


def judged_samples(
    name: str, op: Any, fmt: FloatFormat, device: str = "cpu", every_code: bool = True
) -> list[tuple[str, Sample]]:
    """The samples the checks hold ``op`` to on ``fmt``, each with its label (``sample 5``,
    ``sample 5 transposed``, ``every code``): those ``judge`` names in ``checked``, every code
    passed through each, then (an elementwise op) every code or pair of codes. ``name``: the
    catalogue's; its judgement is the support matrix's when ``op`` is the catalogue's own."""
    made = _float32_samples(op, device, JUDGED)
    judged = _cached_matrix(str(device)).get(name, {}).get(fmt.name) if catalogue().get(name) is op else None
    judged = judged or judge(op, fmt, device, made)
    out: list[tuple[str, Sample]] = []
    for i, layout in judged.checked:
        s = made[i] if layout == "contiguous" else relaid(made[i], layout)
        label = f"sample {i}" + ("" if layout == "contiguous" else f" {layout}")
        out += [(label, one) for one in samples(op, fmt, device, made=[s], every_code=every_code, ufunc_too=False)]
    if every_code:
        out += [("every code", one) for one in _every_code_samples(op, fmt, device)]
    return out


def outcome(op: Any, fmt: FloatFormat, device: str = "cpu", made: list | None = None) -> str:
    """``judge``'s word: ``runs``, ``partial``, ``refused`` or ``n/a``."""
    return judge(op, fmt, device, made).word


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
    return {name: {f: o.word for f, o in row.items()} for name, row in _cached_matrix(str(device)).items()}


def judgements(device: str = "cpu") -> dict[str, dict[str, Outcome]]:
    """``judge`` of every catalogued op on every float8 format (op name -> format name -> Outcome),
    the support matrix's grounds (a copy of the rows; the outcomes are shared)."""
    return {name: dict(row) for name, row in _cached_matrix(str(device)).items()}


@functools.cache
def _cached_matrix(device: str) -> dict[str, dict[str, Outcome]]:
    # (on a short stack: the catalogue's random ops seed torch, which formats the caller's whole
    # stack three times per seed; under pytest that was 40% of the survey, short_stack.py)
    with quiet():
        return call_on_a_short_stack(functools.partial(_support_matrix, device))


def _support_matrix(device: str) -> dict[str, dict[str, Outcome]]:
    formats = probes.float8_formats()
    out = {}
    for name, op in catalogue().items():
        ok, made = survey(functools.partial(_float32_samples, op, device, JUDGED), device)
        memo: dict = {}
        out[name] = {
            f.name: judge(op, f, device, made, memo) if ok and isinstance(made, list) else Outcome("n/a")
            for f in formats
        }
    return out
