"""Conformance checks shared by the suite's tests and by tests/meta, which runs deliberately broken
implementations through them: each returns None when the implementation conforms and a readable
line when it does not. (Cast conformance is ``fp8ref.harness.casts.conformance.check_cast``; _scaled_mm's is
``tests/common/scaled_mm_checks.excess``.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fp8ref.reference.codec import decode, encode
from fp8ref.reference.delayed import AmaxAlgo, te_scale
from fp8ref.reference.formats import FloatFormat
from fp8ref.reference.recipes import RECIPES
from fp8ref.reference.scaling import Granularity, amax, compute_scale


def scale_inputs(dtype: torch.dtype) -> torch.Tensor:
    """Seeded tensors of shape (4, 8, 32): wide ranges, a zero slice, tiny slices."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, 32, generator=gen) * torch.exp2(torch.randint(-12, 12, (4, 8, 1), generator=gen).float())
    x[1, 2] = 0.0  # amax 0 along dim -1
    x[2, :, 5] = 1e-30 if dtype == torch.float32 else 1e-6  # tiny amax along dims 0/1
    x[3] *= 1e-3
    return x.to(dtype)


def scale_mismatch(scale_fn: Callable, x: torch.Tensor, fmt: FloatFormat, g: Granularity, pow2: bool) -> str | None:
    """``scale_fn(x, fmt, g, pow2)`` against fp8ref's ``compute_scale``, bitwise."""
    theirs = scale_fn(x, fmt, g, pow2)
    ours = compute_scale(x, fmt, g, pow2=pow2)
    if theirs.dtype != torch.float32 or theirs.shape != ours.shape:
        return f"scale dtype/shape {theirs.dtype} {tuple(theirs.shape)}, expected float32 {tuple(ours.shape)}"
    # flattened first: nonzero() of a 0-d (tensorwise) comparison has no index columns
    bad = (theirs.view(torch.int32) != ours.view(torch.int32)).reshape(-1).nonzero().flatten()
    if bad.numel() == 0:
        return None
    a, t, o = amax(x, g).reshape(-1), theirs.reshape(-1), ours.reshape(-1)
    return f"{bad.numel()} of {o.numel()} scales differ: " + ", ".join(
        f"amax {a[i].item()!r}: got {t[i].item()!r}, fp8ref {o[i].item()!r}" for i in bad[:4].tolist()
    )


def recipe_table_diffs(table_fn: Callable[[str], dict], names: tuple[str, ...]) -> list[str]:
    """``table_fn(name)`` (a recipe flattened like ``LinearRecipe.describe()``) against fp8ref's."""
    diffs = []
    for name in names:
        theirs, ours = table_fn(name), RECIPES[name].describe()
        diffs += [
            f"{name}.{k}: theirs {theirs.get(k)!r}, fp8ref {ours.get(k)!r}"
            for k in sorted(set(theirs) | set(ours))
            if theirs.get(k) != ours.get(k)
        ]
    return diffs


def delayed_mismatch(
    make: Callable[[], Any],
    amaxes: list[float],
    fmt: FloatFormat,
    history_len: int,
    algo: AmaxAlgo | str,
    margin: int = 0,
) -> str | None:
    """A delayed-scaling implementation (``make()`` returns an object with ``update(amax)`` and
    ``scale``) fed ``amaxes`` one step at a time, against an oracle computed here from the
    window itself: after step t the scale is TE's rule applied to the max of the last
    ``history_len`` amaxes (``max``) or to amax t (``most_recent``), the previous scale kept when
    that is 0 or not finite."""
    impl = make()
    previous = torch.ones(())
    for t, a in enumerate(amaxes):
        impl.update(a)
        window = amaxes[max(0, t + 1 - history_len) : t + 1]
        reduced = max(window) if AmaxAlgo(algo) == AmaxAlgo.MAX else window[-1]
        want = te_scale(torch.tensor(float(reduced)), previous, fmt, margin)
        got = torch.as_tensor(impl.scale, dtype=torch.float32).reshape(())
        if not torch.equal(got.view(torch.int32), want.reshape(()).view(torch.int32)):
            return f"step {t} (amax {a!r}, window {window}): scale {got.item()!r}, expected {want.item()!r}"
        previous = want
    return None


def layouts(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Views of one (64, 96) tensor that are not contiguous, or not at offset 0."""
    return {
        "transposed": x.t(),
        "column slice": x[:, 5:77],
        "every third column": x[:, ::3],
        "row slice at an offset": x[3:50],
        "as_strided": x.as_strided((20, 30), (97, 2), 7),
        "expanded": x[:1].expand(8, -1),
    }


def layout_mismatches(cast: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, fmt: FloatFormat) -> list[str]:
    """The views of ``x`` whose ``cast`` (a view -> uint8 codes) differs from the codec's codes of
    the same values laid out contiguously, on the in-range inputs."""
    bad = []
    for name, view in layouts(x).items():
        got, values = cast(view), view.contiguous()
        in_range = values.float().abs() <= fmt.max
        if not fmt.signed:
            in_range &= values.float() > 0
        if got.shape != values.shape or not torch.equal(got[in_range], encode(values, fmt)[in_range]):
            bad.append(name)
    return bad


def as_matrix(x: torch.Tensor, cols: int = 256) -> torch.Tensor:
    """A flat input set as a (rows, ``cols``) matrix for ``layouts``, padded at the end with its
    own first values so every input is in it (rows >= 64 so every layout's view fits)."""
    x = x.reshape(-1)
    rows = max(64, -(-x.numel() // cols))
    pad = rows * cols - x.numel()
    return torch.cat([x, x.repeat(-(-pad // max(x.numel(), 1)))[:pad]]).reshape(rows, cols)


def layout_bit_mismatches(cast: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> list[str]:
    """The views of ``x`` (``layouts``) whose ``cast`` (a tensor -> a tensor) is not bit for bit
    the cast of the same values laid out contiguously, on every input: overflow, +-inf and NaN
    (NaN codes and payloads) included. One line per view: how many elements differ, the first."""
    bad = []
    for name, view in layouts(x).items():
        got, want = cast(view), cast(view.contiguous())
        if got.shape != want.shape or got.dtype != want.dtype:
            bad.append(f"{name}: {tuple(got.shape)} {got.dtype}, contiguous {tuple(want.shape)} {want.dtype}")
            continue
        gb, wb = (t.contiguous().view(torch.uint8).reshape(*t.shape, -1) for t in (got, want))
        differ = (gb != wb).any(dim=-1)
        if bool(differ.any()):
            i = tuple(int(v) for v in differ.nonzero()[0])
            bad.append(f"{name}: {int(differ.sum())} elements, first {i}: input {view[i].item()!r}")
    return bad


def same_bits(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Equal values with equal signs (so -0.0 is not 0.0), or both NaN."""
    return ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))


def decode_mismatches(
    codes_to: Callable[[torch.Tensor], torch.Tensor], fmt: FloatFormat, target: torch.dtype
) -> list[str]:
    """One line per code (of all 256) whose decode to ``target`` by ``codes_to`` (uint8 codes ->
    target tensor) is not the format's exact value rounded once to ``target``."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = codes_to(codes)
    if got.dtype != target:
        return [f"decoded to {got.dtype}, not {target}"]
    want = decode(codes, fmt).double().to(target)
    bad = (~same_bits(got, want)).nonzero().flatten().tolist()
    return [f"0x{c:02x}: expected {want[c].item()!r}, got {got[c].item()!r}" for c in bad]


def gemm_operand_mismatches(
    recipe: Any, seen: list[dict], x: torch.Tensor, w: torch.Tensor, grad: torch.Tensor
) -> list[str]:
    """Each float8 GEMM torchao ran (``torchao_compat.float8_gemm_operands``) for a Linear with
    input ``x`` (M, K), weight ``w`` (N, K) and output gradient ``grad`` (M, N), against the
    recipe's cast of that GEMM's operands (``emulate.cast_operand``, contraction-last), bitwise;
    and every float8 GEMM the recipe has must have run (a high-precision one must not)."""
    from fp8ref.reference.emulate import cast_operand

    operands = {"output": (x, w), "grad_input": (grad, w.t()), "grad_weight": (grad.t(), x.t())}
    ran = {s["gemm"]: s for s in seen}
    bad = []
    for gemm, (a_hp, b_hp) in operands.items():
        cast = getattr(recipe, gemm)
        if cast.a.fmt is None:
            if gemm in ran:
                bad.append(f"{gemm}: ran in float8, the recipe keeps it in high precision")
            continue
        if gemm not in ran:
            bad.append(f"{gemm}: no float8 GEMM ran")
            continue
        got = ran[gemm]
        for side, value, op, want_hp in (("A", got["a"], cast.a, a_hp), ("B", got["b"].t(), cast.b, b_hp)):
            want = cast_operand(want_hp.contiguous(), op)
            if value.shape != want.shape or not torch.equal(value, want):
                how = "shape" if value.shape != want.shape else f"{int((value != want).sum())} values"
                bad.append(f"{gemm} operand {side} ({op.describe()}): {how} differ from the recipe's cast")
    return bad
