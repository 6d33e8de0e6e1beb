"""Native float8 ops held to the definition, by the kind ``native_op_kinds`` gives each: an op's
samples (``native_ops.samples``: every code, three ways) run on float8 and held, a movement to
the input bytes the op's int64 position tags name (``judge.movement``: codes read from storage,
no one-byte kernel of the install on either side), the others to the op on the definition's
values in float64 (``written``: cast by the definition, ``judge.casts``; ``values`` and ``converts``: rounded once
by the definition). The float64 way runs torch's float64 kernels, other kernels than the float8
one under check, on values fp8ref decoded from the codes; every float8 result is read from its
storage (``judge.stored``) and judged by fp8ref's definition
(``reference.definition.round_by_definition``), never by a torch cast.

``check_op`` returns an ``OpCheck``: the problems (each a line naming the op, the format, the
sample, the first differing codes as hex and what the definition gives), the answers it observed
where the definition leaves them to the implementation (an overflow: saturate or not), and the
deviations it excused (``deviations.NATIVE_OP_DEVIATIONS``: an install's known answer where the
definition gives another, named with its versions).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map

from ...reference.codec import decode
from ...reference.definition import overflows, round_by_definition
from ...reference.formats import FloatFormat
from ..casts.deviations import NATIVE_OP_DEVIATIONS
from ..judge.casts import agrees, cast_readings, excused_cast_deviations
from ..judge.movement import Moved, judge_movement
from ..judge.stored import readable, snapshot, stored_codes, values_of
from ..stack.refusals import first_words, survey
from .layouts import LAYOUTS, in_buffer, outside, place, refused_in_layouts_alone
from .native_op_kinds import KIND, SAMPLE_KIND
from .native_ops import Sample, _order_run, catalogue, judged_samples, quiet

__all__ = ["OpCheck", "check_op", "check_sample", "WRITE_PATHS", "check_written", "check_copy"]

_SHOWN = 4  # differing elements shown per problem


@dataclasses.dataclass
class OpCheck:
    op: str
    fmt: str
    kind: str
    samples: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    observed: dict[str, str] = dataclasses.field(default_factory=dict)
    known_deviations: dict[str, int] = dataclasses.field(default_factory=dict)  # deviation key -> elements


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _hex(code: Any) -> str:
    return f"0x{int(code):02x}"


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """A one-byte tensor's codes read from its storage (``judge.stored``: no kernel of the install
    runs on them); any other tensor as it is."""
    return stored_codes(t) if t.element_size() == 1 and readable(t) else t.cpu()


def _movement(got: Any, ref: Any, where: str, ref_name: str = "the uint8 view's") -> str | None:
    if not isinstance(got, torch.Tensor) or not isinstance(ref, torch.Tensor):
        gives = ref_name.removesuffix("'s")
        return None if got == ref else f"{where}: {got!r}, {gives} gives {ref!r}"
    if got.shape != ref.shape:
        return f"{where}: shape {tuple(got.shape)}, {ref_name} {tuple(ref.shape)}"
    if (got.element_size() == 1) != (ref.element_size() == 1):
        return f"{where}: dtype {got.dtype}, {ref_name} {ref.dtype}"
    a, b = _bytes_of(got), _bytes_of(ref)
    if a.dtype != b.dtype:
        return f"{where}: dtype {got.dtype}, {ref_name} {ref.dtype}"
    if torch.equal(a, b):
        return None
    bad = (a != b).reshape(-1).nonzero().reshape(-1)[:_SHOWN]
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    pairs = ", ".join(f"[{i}] {_hex(flat_a[i])} not {_hex(flat_b[i])}" for i in bad.tolist())
    return f"{where}: {int((a != b).sum())} of {a.numel()} bytes differ from {ref_name}: {pairs}"


def _same_numbers(got: torch.Tensor, want: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Where ``got`` and ``want`` (float64) agree: equal with the same sign (so -0 is not +0), or
    both NaN; True where ``mask`` (if given) is False."""
    same = ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))
    return same if mask is None else same | ~mask


def _numbers(
    got: torch.Tensor,
    wide: Any,
    fmt: FloatFormat,
    where: str,
    *,
    written: bool,
    mask: torch.Tensor | None,
    check: OpCheck,
    codes_in: list[torch.Tensor],
    on_codes: Callable[[], Any] | None = None,
) -> str | None:
    """``got`` against the float64 result ``wide``: in float8, rounded once by the definition (or
    cast by ``.to`` when ``written``), overflow observed; in another dtype, converted to it."""
    if not isinstance(wide, torch.Tensor):
        wide = torch.tensor(wide, dtype=torch.float64)
    if got.shape != wide.shape:
        return f"{where}: shape {tuple(got.shape)}, the definition's {tuple(wide.shape)}"
    dtype = fmt.torch_dtype()
    if got.dtype == dtype:
        codes = stored_codes(got)
        got_v = values_of(codes, fmt)
        if written:  # (as a cast by the definition writes it: rounded once or through float32, saturated or not)
            x = wide.cpu().double()
            readings = cast_readings(x, fmt)
            want, over = readings[0].want, agrees(got_v, readings)
            if not bool(over.all()):  # (a named deviation of torch's cast: its inputs, its answer)
                over |= excused_cast_deviations(x, fmt, codes, over, check.known_deviations)
        else:
            w = wide.cpu().double()
            want = round_by_definition(w, fmt)
            over = overflows(w, fmt)
            if bool(over.any()):  # implementation-defined: saturate (max) or not
                sat = got_v[over].abs() == fmt.max
                word = "saturate" if bool(sat.all()) else ("nonsaturate" if not bool(sat.any()) else "mixed")
                check.observed[f"{where}: overflow"] = word
        same = _same_numbers(got_v, want, mask) | over
    else:
        got_v = got.cpu()
        if got_v.is_complex() or wide.is_complex():  # (real and imaginary parts, both to agree)
            real = torch.view_as_real(got_v.to(torch.complex128)), torch.view_as_real(wide.cpu().to(torch.complex128))
            same = _same_numbers(*real, None).all(-1)
        else:
            same = _same_numbers(got_v.double(), wide.cpu().to(got.dtype).double(), None)
        if mask is not None:
            same = same | ~mask
        want = wide.cpu().to(got.dtype)
        codes = None
    if not bool(same.all()):
        same = same | _known_deviation_elements(check, fmt, got.cpu(), same, codes_in, on_codes)
    if bool(same.all()):
        return None
    bad = (~same).reshape(-1).nonzero().reshape(-1)[:_SHOWN].tolist()
    flat_got = got.cpu().reshape(-1)
    flat_want = want.reshape(-1) if want.dim() == got.dim() else want.reshape(got.numel(), -1)
    shown = []
    for i in bad:
        text = _hex(codes.reshape(-1)[i]) if codes is not None else repr(flat_got[i].item())
        shown.append(f"[{i}] {text} not {flat_want[i].tolist()}")
    return f"{where}: {int((~same).sum())} of {got.numel()} elements differ from the definition's: {', '.join(shown)}"


def _known_deviation_elements(
    check: OpCheck,
    fmt: FloatFormat,
    got: torch.Tensor,
    same: torch.Tensor,
    codes_in: list[torch.Tensor],
    on_codes: Callable[[], Any] | None = None,
) -> torch.Tensor:
    """The elements a named deviation of this op excuses (its exact answer only), counted.
    ``on_codes``: the same op's output on the uint8 view, for a deviation whose answer is that."""
    excused = torch.zeros_like(same)
    for dev in NATIVE_OP_DEVIATIONS:
        if dev.op == check.op and fmt.name in dev.formats:
            hit = ~same & dev.answer(got, codes_in, fmt, on_codes)
            if bool(hit.any()):
                check.known_deviations[dev.key] = check.known_deviations.get(dev.key, 0) + int(hit.sum())
                excused |= hit
    return excused


def _converts_mask(sample: Sample, got: torch.Tensor) -> torch.Tensor | None:
    """For a conversion to an integer dtype: where the input is finite and in the integer's range."""
    inp = sample.ways["float64"][0]
    if (
        not isinstance(inp, torch.Tensor)
        or inp.shape != got.shape
        or got.is_floating_point()
        or got.dtype == torch.bool
    ):
        return None
    info = torch.iinfo(got.dtype)
    return torch.isfinite(inp) & (inp >= info.min) & (inp <= info.max)


def check_sample(name: str, op: Any, kind: str, fmt: FloatFormat, sample: Sample, label: str, check: OpCheck) -> None:
    """One sample of ``op`` held to its kind's check; problems and observations go to ``check``."""
    where = f"{name} on {fmt.name}, {label}"
    kind = SAMPLE_KIND.get(name, lambda s, k: k)(sample, kind)
    # (a movement is judged against its inputs as the op found them: kept as memory first)
    before = tree_map(_kept(fmt), sample.ways["float8"]) if kind == "movement" else None
    ok, got = survey(functools.partial(sample.call, op.op))
    if not ok:  # (ran with other codes when judged, native_ops.judge, but not with these: a finding)
        check.observed[f"{where}: refused"] = first_words(got, 160)
        return
    if kind == "unchecked":  # (this sample makes the op a reduction: see native_op_kinds.SAMPLE_KIND)
        check.observed[f"{where}: unchecked"] = "a reduction on this sample"
        return
    if before is not None:
        inp, args, kwargs = before
        moved = judge_movement(op.op, (inp, *args), kwargs, got, {fmt.torch_dtype()}, name)
        if moved.status == "violation":
            check.problems.append(f"{where}: {_moved_problem(moved)}")
        elif moved.status == "unchecked":
            check.problems.append(f"{where}: movement not judged: {moved.reason}")
        return
    way = "float64"
    ok, ref = survey(functools.partial(sample.call_float64, op.op))
    if not ok:  # (the reference way cannot run this op: say so)
        check.problems.append(f"{where}: the {way} way refused it ({type(ref).__name__}: {ref}); no reference")
        return
    got_leaves, ref_leaves = _leaves(got), _leaves(ref)
    if len(got_leaves) != len(ref_leaves):
        check.problems.append(f"{where}: {len(got_leaves)} outputs, the {way} way's {len(ref_leaves)}")
        return
    for j, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        at = where if len(got_leaves) == 1 else f"{where}, output {j}"
        if not isinstance(g, torch.Tensor):
            same = g == r or (isinstance(g, float) and isinstance(r, float) and g != g and r != r)
            problem = None if same else f"{at}: {g!r}, the definition's {r!r}"
        else:
            mask = _converts_mask(sample, g) if kind == "converts" else None
            on_codes = functools.partial(_output_on_codes, op, sample, j)
            written = kind == "written"
            problem = _numbers(
                g, r, fmt, at, written=written, mask=mask, check=check, codes_in=sample.codes, on_codes=on_codes
            )
        if problem is not None:
            check.problems.append(problem)


def _kept(fmt: FloatFormat) -> Callable[[Any], Any]:
    """A sample's float8 tensor kept as memory (``judge.stored.snapshot``), anything else as is."""
    dtype = fmt.torch_dtype()
    return lambda v: snapshot(v) if isinstance(v, torch.Tensor) and v.dtype == dtype and readable(v) else v


def _moved_problem(moved: Moved) -> str:
    if moved.dtype is None:
        return moved.problem
    where = f"output {moved.output}, " if moved.output else ""
    return (
        f"{moved.count} of {moved.numel} bytes differ from the input bytes the op's position tags name: "
        f"{where}first at {list(moved.index)} {_hex(moved.got)} not {_hex(moved.want)}"
    )


def _output_on_codes(op: Any, sample: Sample, j: int) -> torch.Tensor | None:
    """Output ``j`` of ``op`` on the sample's uint8 view (None when that way refuses it)."""
    ok, got = survey(functools.partial(sample.call_uint8, op.op))
    leaves = _leaves(got) if ok else []
    return leaves[j].cpu() if j < len(leaves) and isinstance(leaves[j], torch.Tensor) else None


def check_op(name: str, fmt: FloatFormat, device: str = "cpu", op: Any = None, kind: str | None = None) -> OpCheck:
    """The catalogued op ``name`` (or ``op``, a stand-in with its ``op`` and ``sample_inputs``) on
    ``fmt``, held to its kind's check (``kind``, default from the table) on the samples it ran on
    when judged, contiguous and in every other layout it ran in, every code
    (``native_ops.judged_samples``)."""
    op = op if op is not None else catalogue()[name]
    kind = kind or KIND[name]
    check = OpCheck(name, fmt.name, kind)
    with quiet():
        for label, sample in judged_samples(name, op, fmt, device):
            check.samples += 1
            check_sample(name, op, kind, fmt, sample, label, check)
    return check


# --- values written into float8 from Python scalars and other dtypes ----------------------------------
def _written_values(fmt: FloatFormat) -> list[float]:
    """Values a write into ``fmt`` must round as ``.to`` rounds them: zeros of both signs, +-1,
    +-max, past max (saturate or not), +-inf, NaN, the smallest subnormal and half of it, a value
    between two codes, and one just above a tie that a float32 step would move onto the tie."""
    tiny = fmt.min_subnormal if fmt.min_subnormal else fmt.min_normal
    return [0.0, -0.0, 1.0, -1.0, fmt.max, -fmt.max, fmt.max * 1.25, math.inf, -math.inf, math.nan] + [
        tiny,
        tiny / 2,
        0.3,
        1.0 + 2.0 ** -(fmt.man_bits + 1) + 2.0**-40,
        2.0**-127,
    ]


def _write_paths(dtype: torch.dtype, device: str) -> dict[str, Callable[[float], torch.Tensor]]:
    """Each way training code writes one value into a float8 tensor (4 elements where it makes one)."""

    def into(v: float, how: str) -> torch.Tensor:
        t = torch.zeros(4, dtype=torch.uint8, device=device).view(dtype)
        if how == "fill_":
            t.fill_(v)
        elif how == "setitem":
            t[:] = v
        elif how == "index_put_":  # (values of the destination's dtype, as index_put_ takes them: the codes .to gives)
            values = torch.full((4,), v, dtype=torch.float64, device=device).to(dtype)
            t.index_put_((torch.arange(4, device=device),), values)
        elif how == "masked_fill":
            t = t.masked_fill(torch.ones(4, dtype=torch.bool, device=device), v)
        elif how == "copy_":
            t.copy_(torch.full((4,), v, dtype=torch.float64, device=device))
        return t

    paths: dict[str, Callable[[float], torch.Tensor]] = {
        how: functools.partial(lambda v, how: into(v, how), how=how)
        for how in ("fill_", "setitem", "index_put_", "masked_fill", "copy_")
    }
    paths |= {
        "full": lambda v: torch.full((4,), v, dtype=dtype, device=device),
        "full_like": lambda v: torch.full_like(torch.zeros(4, dtype=torch.uint8, device=device).view(dtype), v),
        "new_full": lambda v: torch.zeros(1, dtype=torch.uint8, device=device).view(dtype).new_full((4,), v),
        "tensor": lambda v: torch.tensor([v] * 4, dtype=dtype, device=device),
        "pad": lambda v: torch.nn.functional.pad(
            torch.zeros(0, dtype=torch.uint8, device=device).view(dtype), (4, 0), value=v
        ),
    }
    return paths


WRITE_PATHS = (
    "fill_",
    "setitem",
    "index_put_",
    "masked_fill",
    "copy_",
    "full",
    "full_like",
    "new_full",
    "tensor",
    "pad",
)


def check_written(
    fmt: FloatFormat, device: str = "cpu", paths: dict[str, Callable[[float], torch.Tensor]] | None = None
) -> dict[str, str]:
    """For each write path (``WRITE_PATHS``): ``as .to`` when every value (``_written_values``)
    it accepts lands on the codes ``.to`` gives it from float64 (any NaN for a NaN), followed by
    the values it refuses, if any, and the install's words; ``refused: ...`` when it refuses
    them all; ``differs: value -> code (.to: code), ...`` when any lands elsewhere. ``paths``:
    stand-ins for torch's (path name -> a function writing one value into four elements)."""
    dtype = fmt.torch_dtype()
    assert dtype is not None
    out = {}
    for how, write in (paths if paths is not None else _write_paths(dtype, device)).items():
        diffs, refused, why = [], [], ""
        values = _written_values(fmt)
        for v in values:
            want = _to_codes(v, dtype, device)
            ok, got = survey(functools.partial(write, v))
            if not ok:  # (torch refusing this path, or this value)
                refused.append(repr(v))
                # (torch's namespace in the words, c10:: or at::, varies between builds)
                words = re.sub(r"\b(?:c10|at)::", "", (str(got).splitlines() or [""])[0])[:120]
                why = why or f"{type(got).__name__}: {words}"
                continue
            got = got.cpu().view(torch.uint8)
            if want is None:  # .to itself refuses the value: whatever the path does is its own answer
                continue
            nan = math.isnan(v) and fmt.has_nan and bool(torch.isnan(decode(got, fmt)).all())
            if not nan and not bool((got == want).all()):
                diffs.append(f"{v!r} -> {_hex(got[0])} (.to: {_hex(want[0])})")
        if diffs:
            out[how] = "differs: " + ", ".join(diffs[:4]) + (f" (+{len(diffs) - 4})" if len(diffs) > 4 else "")
        elif len(refused) == len(values):
            out[how] = f"refused: {why}"
        else:
            out[how] = "as .to" + (f"; refuses {' '.join(refused)} ({why})" if refused else "")
    return out


def _to_codes(v: float, dtype: torch.dtype, device: str) -> torch.Tensor | None:
    ok, codes = survey(
        lambda: torch.tensor([v] * 4, dtype=torch.float64, device=device).to(dtype).cpu().view(torch.uint8)
    )
    return codes if ok else None  # (None: the cast refuses it)


# --- copy_ between memory layouts ------------------------------------------------------------------
_COPY_SHAPE = (2, 4, 4, 8)  # 4-d, so every layout applies (channels_last too); 256 elements: every code
_WAYS_OF_COPY = ("float8 -> float8", "float32 -> float8", "float8 -> float32")


def check_copy(
    fmt: FloatFormat, device: str = "cpu", copy: Callable[[torch.Tensor, torch.Tensor], Any] | None = None
) -> tuple[list[str], dict[str, str]]:
    """``copy_`` between float8 tensors and into and out of them, with source and destination
    each in every layout (``layouts.LAYOUTS``), every code: float8 into float8 moves the codes bit
    for bit; float32 into float8 writes what ``.to`` writes; float8 into float32 gives the
    definition's values; and no copy touches a byte of the destination's storage outside its
    elements. (problems, refusals: what the install refused, by case, with its words; a case
    refused while the same way runs contiguous into contiguous is a problem too: the install
    copies these dtypes, and not in that layout). ``copy``: a stand-in for ``Tensor.copy_``
    (destination, source)."""
    dtype = fmt.torch_dtype()
    assert dtype is not None
    do = copy or (lambda dst, src: dst.copy_(src))
    codes = _order_codes(math.prod(_COPY_SHAPE)).view(_COPY_SHAPE).to(device)
    values = decode(codes.cpu().reshape(-1), fmt).reshape(_COPY_SHAPE)
    problems: list[str] = []
    refused: dict[str, str] = {}
    for way in _WAYS_OF_COPY:
        for src_layout in LAYOUTS:
            for dst_layout in LAYOUTS:
                case = f"copy_ {way}, {src_layout} into {dst_layout}"
                problem = _one_copy(way, src_layout, dst_layout, codes, values, fmt, do, refused, case)
                if problem:
                    problems.append(f"{case} on {fmt.name}: {problem}")
        contiguous = f"copy_ {way}, contiguous into contiguous"
        runs = "contiguous into contiguous runs"
        problems += refused_in_layouts_alone(refused, f"copy_ {way},", contiguous, fmt.name, runs)
    return problems, refused


def _one_copy(
    way: str,
    src_layout: str,
    dst_layout: str,
    codes: torch.Tensor,
    values: torch.Tensor,
    fmt: FloatFormat,
    do: Callable[[torch.Tensor, torch.Tensor], Any],
    refused: dict[str, str],
    case: str,
) -> str | None:
    dtype = fmt.torch_dtype()
    assert dtype is not None
    if way == "float32 -> float8":  # (the values of the codes, finite ones: what .to writes back)
        finite = torch.where(torch.isfinite(values), values, torch.zeros(()).double()).float()
        src = place(finite.to(codes.device), src_layout)
        want = finite.to(codes.device).to(dtype).view(torch.uint8)  # (checked against the codec elsewhere)
    else:
        src = place(codes, src_layout).view(dtype)
        want = codes
    into = torch.float32 if way == "float8 -> float32" else torch.uint8
    view, raw = in_buffer(tuple(codes.shape), into, dst_layout, codes.device)
    before = raw.clone()
    dst = view if into == torch.float32 else view.view(dtype)
    ok, got = survey(functools.partial(do, dst, src))
    if not ok:
        refused[case] = first_words(got, 160)
        return None
    if way == "float8 -> float32":
        same = _same_numbers(dst.cpu().double(), values, None)
        if not bool(same.all()):
            i = int((~same).reshape(-1).nonzero()[0])
            read, want_v = dst.reshape(-1)[i].item(), values.reshape(-1)[i].item()
            return f"element {i} (code {_hex(codes.reshape(-1)[i])}) reads {read!r}, not {want_v!r}"
    else:
        ref_name = "the source's" if way == "float8 -> float8" else "what .to writes"
        problem = _movement(view, want, "the destination's elements", ref_name)
        if problem:
            return problem
    touched = outside(view) & (raw != before)
    if bool(touched.any()):
        at = touched.nonzero().reshape(-1)[:_SHOWN].tolist()
        return f"{int(touched.sum())} byte(s) of the destination's storage outside its elements written, at {at}"
    return None


def _order_codes(n: int) -> torch.Tensor:
    """``n`` codes, every code in turn (the catalogue's order: the special ones first)."""
    return _order_run(n)
