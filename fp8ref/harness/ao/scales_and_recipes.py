"""torchao's float8 scales and recipe table against fp8ref's: each check takes the implementation
(a scale function, a table of recipes), so tests/meta can pass a broken one, and says what
differs. The scales at the edges a float32 ``log2`` decides: ``scale_edges``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...reference.formats import FloatFormat
from ...reference.recipes import RECIPES
from ...reference.scaling import Granularity, amax, compute_scale


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
