"""Which operand of which GEMM of a linear layer gets which FP8 format, granularity and scaling.

A linear layer runs three GEMMs. Each is written here as ``C = A @ B^T`` with both operands laid
out *contraction-last*, so that every granularity (axiswise = one scale per row, 1xK tiles, MX
blocks) is along the contraction dim, which is where FP8 GEMM kernels need the scales:

    output      = input  @ weight^T   A = input (M, K),          B = weight (N, K)
    grad_input  = grad_y @ weight     A = grad_y (M, N),         B = weight^T (K, N)
    grad_weight = grad_y^T @ input    A = grad_y^T (N, M),       B = input^T (K, M)

Recipes (sources cited; the definitions are written from their documentation):
- ``tensorwise``: torchao ``Float8LinearConfig()`` — input/weight E4M3, grad E5M2, one scale per
  tensor, no pow2; fast accumulation in the output GEMM only.
- ``rowwise``: torchao ``from_recipe_name("rowwise")`` — everything E4M3, axiswise along each
  GEMM's contraction dim, power-of-two scales.
- ``rowwise_with_gw_hp``: torchao — output as rowwise; grad_input with grad_y axiswise and the
  weight tensorwise; grad_weight in high precision.
- ``blockwise``: DeepSeek-V3 — everything E4M3, activations and gradients in 1x128 tiles, weights
  in 128x128 blocks (so grad_weight's operands are 128x1 tiles of grad_y and input).
- ``mxfp8``: OCP MX via torchao ``mx_formats`` — everything E4M3 in blocks of 32 along the
  contraction dim with E8M0 scales (FLOOR by default).
- ``mxfp4``: OCP MX with FP4 elements — everything E2M1 in blocks of 32 along the contraction dim
  (FLOOR); the gradient operands rounded stochastically, as MXFP4 training does ("Training LLMs
  with MXFP4", Tseng et al. 2025). Its random Hadamard transform is not modelled.
- ``nvfp4``: NVIDIA's NVFP4 training recipe ("Pretraining LLMs with NVFP4", 2025; torchao
  ``nvfp4_training``) — every operand NVFP4, two-level (per-tensor scale from its own amax),
  gradients rounded stochastically. Not modelled: the weights' 16x16 2D blocks and the random
  Hadamard transform on grad_weight's operands.
- ``static``: modded-nanogpt's FP8 custom op — fixed scales, input / 2, weight / 32 in E4M3,
  grad_y / 2^29 in E5M2; the forward's FP8 input is reused for grad_weight.
"""

from __future__ import annotations

import dataclasses

from .codec import Rounding
from .formats import E2M1FN, E4M3FN, E5M2, FloatFormat
from .scaling import Granularity, axiswise, block, mx, nvfp4, tensorwise, tile
from .validate import choice, one_of

__all__ = [
    "OperandCast",
    "GemmRecipe",
    "LinearRecipe",
    "RECIPES",
    "TORCHAO_RECIPES",
    "FP4_RECIPES",
    "get_recipe",
    "HIGH_PRECISION",
]


@dataclasses.dataclass(frozen=True)
class OperandCast:
    """How one GEMM operand is cast. ``fmt=None`` keeps it in high precision. ``static_scale``
    (torchao convention: multiplied on quantize) replaces current scaling when set."""

    fmt: FloatFormat | None
    granularity: Granularity = dataclasses.field(default_factory=tensorwise)
    pow2: bool = False
    static_scale: float | None = None
    rounding: Rounding = Rounding.RNE

    def __post_init__(self) -> None:
        object.__setattr__(self, "rounding", choice(self.rounding, Rounding, "rounding"))

    def describe(self) -> str:
        if self.fmt is None:
            return "high-precision"
        how = f"static x{self.static_scale:g}" if self.static_scale is not None else str(self.granularity)
        return (
            f"{self.fmt.name} {how}"
            + (" pow2" if self.pow2 else "")
            + (f" {self.rounding}" if self.rounding != Rounding.RNE else "")
        )


HIGH_PRECISION = OperandCast(None)


@dataclasses.dataclass(frozen=True)
class GemmRecipe:
    a: OperandCast
    b: OperandCast
    fast_accum: bool = False

    def __post_init__(self) -> None:
        if (self.a.fmt is None) != (self.b.fmt is None):
            raise ValueError("a, b: both operands of a GEMM must be FP8 or both high precision")


@dataclasses.dataclass(frozen=True)
class LinearRecipe:
    name: str
    output: GemmRecipe
    grad_input: GemmRecipe
    grad_weight: GemmRecipe
    # torchao's float8 training offers it under this name (Float8LinearConfig.from_recipe_name)
    torchao: bool = False

    def describe(self) -> dict:
        """A flat, stable description: ``{"output.a": "e4m3fn tensorwise", ...}``."""
        out = {}
        for gemm in ("output", "grad_input", "grad_weight"):
            g = getattr(self, gemm)
            out[f"{gemm}.a"] = g.a.describe()
            out[f"{gemm}.b"] = g.b.describe()
            out[f"{gemm}.fast_accum"] = g.fast_accum
        return out


def _rowwise(fmt: FloatFormat = E4M3FN) -> OperandCast:
    return OperandCast(fmt, axiswise(-1), pow2=True)


def _op(
    fmt: FloatFormat | None,
    granularity: Granularity | None = None,
    pow2: bool = False,
    static_scale: float | None = None,
    rounding: Rounding = Rounding.RNE,
) -> OperandCast:
    return OperandCast(fmt, granularity or tensorwise(), pow2, static_scale, rounding)


RECIPES: dict[str, LinearRecipe] = {
    "tensorwise": LinearRecipe(
        "tensorwise",
        output=GemmRecipe(_op(E4M3FN), _op(E4M3FN), fast_accum=True),
        grad_input=GemmRecipe(_op(E5M2), _op(E4M3FN)),
        grad_weight=GemmRecipe(_op(E5M2), _op(E4M3FN)),
        torchao=True,
    ),
    "rowwise": LinearRecipe(
        "rowwise",
        output=GemmRecipe(_rowwise(), _rowwise(), fast_accum=True),
        grad_input=GemmRecipe(_rowwise(), _rowwise()),
        grad_weight=GemmRecipe(_rowwise(), _rowwise()),
        torchao=True,
    ),
    "rowwise_with_gw_hp": LinearRecipe(
        "rowwise_with_gw_hp",
        output=GemmRecipe(_rowwise(), _rowwise(), fast_accum=True),
        grad_input=GemmRecipe(_rowwise(), _op(E4M3FN, pow2=True)),
        grad_weight=GemmRecipe(HIGH_PRECISION, HIGH_PRECISION),
        torchao=True,
    ),
    "blockwise": LinearRecipe(
        "blockwise",
        output=GemmRecipe(_op(E4M3FN, tile(128)), _op(E4M3FN, block(128))),
        grad_input=GemmRecipe(_op(E4M3FN, tile(128)), _op(E4M3FN, block(128))),
        grad_weight=GemmRecipe(_op(E4M3FN, tile(128)), _op(E4M3FN, tile(128))),
    ),
    "mxfp8": LinearRecipe(
        "mxfp8",
        output=GemmRecipe(_op(E4M3FN, mx(32)), _op(E4M3FN, mx(32))),
        grad_input=GemmRecipe(_op(E4M3FN, mx(32)), _op(E4M3FN, mx(32))),
        grad_weight=GemmRecipe(_op(E4M3FN, mx(32)), _op(E4M3FN, mx(32))),
    ),
    "mxfp4": LinearRecipe(
        "mxfp4",
        output=GemmRecipe(_op(E2M1FN, mx(32)), _op(E2M1FN, mx(32))),
        grad_input=GemmRecipe(_op(E2M1FN, mx(32), rounding=Rounding.SR), _op(E2M1FN, mx(32))),
        grad_weight=GemmRecipe(_op(E2M1FN, mx(32), rounding=Rounding.SR), _op(E2M1FN, mx(32))),
    ),
    "nvfp4": LinearRecipe(
        "nvfp4",
        output=GemmRecipe(_op(E2M1FN, nvfp4()), _op(E2M1FN, nvfp4())),
        grad_input=GemmRecipe(_op(E2M1FN, nvfp4(), rounding=Rounding.SR), _op(E2M1FN, nvfp4())),
        grad_weight=GemmRecipe(_op(E2M1FN, nvfp4(), rounding=Rounding.SR), _op(E2M1FN, nvfp4())),
    ),
    "static": LinearRecipe(
        "static",
        output=GemmRecipe(_op(E4M3FN, static_scale=1 / 2.0), _op(E4M3FN, static_scale=1 / 32.0), fast_accum=True),
        grad_input=GemmRecipe(_op(E5M2, static_scale=2.0**-29), _op(E4M3FN, static_scale=1 / 32.0)),
        grad_weight=GemmRecipe(_op(E5M2, static_scale=2.0**-29), _op(E4M3FN, static_scale=1 / 2.0)),
    ),
}


# torchao's float8 training recipes (torchao 0.15-0.18), by name
TORCHAO_RECIPES: tuple[str, ...] = tuple(name for name, r in RECIPES.items() if r.torchao)
# the recipes whose elements are FP4 (coarser than any FP8 acceptance bound)
FP4_RECIPES: tuple[str, ...] = tuple(
    name for name, r in RECIPES.items() if r.output.a.fmt is not None and r.output.a.fmt.bits == 4
)


def get_recipe(recipe: str | LinearRecipe) -> LinearRecipe:
    if isinstance(recipe, LinearRecipe):
        return recipe
    if isinstance(recipe, str):
        return RECIPES[one_of(recipe, sorted(RECIPES), "recipe")]
    raise TypeError(f"recipe: expected a recipe name or a LinearRecipe, got {type(recipe).__name__}")
