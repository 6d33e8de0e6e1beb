"""transformers' fine-grained FP8 held to the block-checkpoint reference (``reference.block_fp8``):
the quantizer a checkpoint is saved with, the loader that dequantizes it, the backward a LoRA step
on a frozen FP8 layer takes. Each check returns a ``BlockCheck``: problems (the weight, what the
reference gives, what came back), deviations excused for their exact answer
(``deviations.BLOCK_FP8_DEVIATIONS``, counted), and what was observed where the definition is
silent (which weights the quantizer passes through, which the loader refuses). The paths under
test are arguments, transformers' own by default, so tests/meta can hand in a broken stand-in.

The weights: 128 x 128 blocks of bfloat16 values spread over 2^-12 ... 2^4 with a block of zeros,
two experts stacked, weights whose last blocks are ragged (448 x 200: the grid divides the shape;
576 x 256, DeepSeek-V3's 576 rows: it does not), and float32 blocks whose amax sits at 448 x 2^k
and one float32 ulp above it, where a UE8M0 inverse scale turns from 2^k to 2^(k+1).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from ...reference.block_fp8 import (
    BLOCK,
    BlockFp8,
    ScaleFormat,
    block_amax,
    block_scales,
    expand,
    quantize_blocks,
    round_up_to_pow2,
)
from ...reference.codec import decode, encode
from ...reference.formats import E4M3FN
from ..casts.deviations import (
    TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE,
    TRANSFORMERS_LOADER_BLOCKS_FROM_GRID,
    TRANSFORMERS_SCALE_THROUGH_RECIPROCAL,
    TRANSFORMERS_UE8M0_F32_LOG2,
)
from ..stack.refusals import describe
from . import transformers_fp8 as hf

__all__ = [
    "BlockCheck",
    "weights",
    "stored_dtype",
    "check_quantize",
    "passes_through",
    "judge_loaded",
    "check_loader",
    "check_backward",
    "check_lora_input_grad",
    "profile_value",
]

_SHOWN = 4


@dataclasses.dataclass
class BlockCheck:
    problems: list[str] = dataclasses.field(default_factory=list)
    known_deviations: dict[str, int] = dataclasses.field(default_factory=dict)  # deviation key -> blocks or elements
    observed: dict[str, str] = dataclasses.field(default_factory=dict)

    def count_known_deviation(self, key: str, n: int) -> None:
        self.known_deviations[key] = self.known_deviations.get(key, 0) + n


def profile_value(check: BlockCheck) -> str:
    """The check as one profile value: ``definition``, ``deviates: <keys>`` or ``differs``."""
    if check.problems:
        return "differs"
    return f"deviates: {' '.join(sorted(check.known_deviations))}" if check.known_deviations else "definition"


def _boundary_blocks() -> torch.Tensor:
    """float32, one 128 x 128 block per amax: 448 x 2^k and the next float32 up, k in -10, -3, 0, 5, 9."""
    gen = torch.Generator().manual_seed(21)
    amaxes = []
    for k in (-10, -3, 0, 5, 9):
        a = torch.tensor(448.0 * 2.0**k, dtype=torch.float32)
        amaxes += [a, torch.nextafter(a, torch.tensor(float("inf")))]
    blocks = []
    for a in amaxes:
        b = (torch.rand(128, 128, generator=gen) * 2 - 1) * a * 0.9
        b[5, 7] = a
        blocks.append(b)
    return torch.cat(blocks, dim=1)


def weights() -> dict[str, torch.Tensor]:
    """The weights every check quantizes (module docstring), by name."""
    gen = torch.Generator().manual_seed(20)
    spread = torch.exp2(torch.randint(-12, 5, (2, 3), generator=gen).float()).repeat_interleave(128, 0)
    blocks = torch.randn(256, 384, generator=gen) * spread.repeat_interleave(128, 1)
    blocks[128:, :128] = 0.0

    def ragged(rows: int, cols: int) -> torch.Tensor:
        # each block its own magnitude, 2^-9 ... 2^-2 apart, so a block read in the wrong place shows
        grid_rows, grid_cols = -(-rows // 128), -(-cols // 128)
        per_block = torch.exp2(torch.randperm(grid_rows * grid_cols, generator=gen).float() - 9).reshape(
            grid_rows, grid_cols
        )
        spread = per_block.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
        return (torch.randn(rows, cols, generator=gen) * spread).to(torch.bfloat16)

    return {
        "256x384": blocks.to(torch.bfloat16),
        "2x256x128": (torch.randn(2, 256, 128, generator=gen) * 0.05).to(torch.bfloat16),
        "448x200": ragged(448, 200),
        "576x256": ragged(576, 256),
        "ue8m0-boundaries": _boundary_blocks(),
    }


DIVISIBLE = ("256x384", "2x256x128", "ue8m0-boundaries")
RAGGED = ("448x200", "576x256")


def stored_dtype(scale_fmt: ScaleFormat | str) -> torch.dtype:
    """The dtype a checkpoint stores the inverse scales in: float32, or E8M0 for UE8M0."""
    return torch.float8_e8m0fnu if ScaleFormat(scale_fmt) == ScaleFormat.UE8M0 else torch.float32


def _hexes(codes: torch.Tensor, want: torch.Tensor) -> str:
    bad = (codes != want).reshape(-1).nonzero().reshape(-1)[:_SHOWN].tolist()
    c, w = codes.reshape(-1), want.reshape(-1)
    return ", ".join(f"[{i}] 0x{int(c[i]):02x} not 0x{int(w[i]):02x}" for i in bad)


Quantize = Callable[[torch.Tensor, tuple[int, int], str], Any]


def _candidates(amax: torch.Tensor, fmt: ScaleFormat) -> list[tuple[tuple[str, ...], torch.Tensor, torch.Tensor]]:
    """Per block, the (deviation keys, forward scale, stored inverse) of the definition (no key)
    and of each named deviation's answer, alone and together: what a quantizer's block may hold."""
    recip = TRANSFORMERS_SCALE_THROUGH_RECIPROCAL
    float_scales = {(): block_scales(amax, ScaleFormat.FLOAT)[0], (recip.key,): recip.answer(amax)}
    out = []
    for keys, scale in float_scales.items():
        inv = (1.0 / scale.double()).float()  # (a correctly rounded float32 reciprocal, as torch's)
        if fmt == ScaleFormat.FLOAT:
            out.append((keys, scale, inv))
            continue
        for more, pow2 in (
            ((), round_up_to_pow2(inv)),
            ((TRANSFORMERS_UE8M0_F32_LOG2.key,), TRANSFORMERS_UE8M0_F32_LOG2.answer(inv)),
        ):
            out.append(((*keys, *more), (1.0 / pow2.double()).float(), pow2))
    return out


def check_quantize(scale_fmt: ScaleFormat | str, quantize: Quantize = hf.quantize) -> BlockCheck:
    """The quantizer on every weight a 128 x 128 grid divides: each block's stored inverse scale
    (and its stored dtype) is the reference's, or a named deviation's exact answer (excused,
    counted per block); the codes are then bitwise the quantization under the forward scale that
    block's answer implies."""
    fmt = ScaleFormat(scale_fmt)
    check = BlockCheck()
    all_weights = weights()
    for name in DIVISIBLE:
        w = all_weights[name]
        got = quantize(w, BLOCK, fmt.value)
        if got is None:
            check.problems.append(f"{name} ({fmt}): passed through unquantized, though 128 x 128 blocks divide it")
            continue
        codes, inv, dtype = got
        if dtype != stored_dtype(fmt):
            check.problems.append(f"{name} ({fmt}): inverse scales stored as {dtype}, expected {stored_dtype(fmt)}")
        (_, ref_scale, ref_inv), *deviating = _candidates(block_amax(w, BLOCK), fmt)
        if inv.shape != ref_inv.shape or codes.shape != w.shape:
            check.problems.append(
                f"{name} ({fmt}): codes {tuple(codes.shape)} with a scale grid {tuple(inv.shape)}, expected "
                f"{tuple(w.shape)} with {tuple(ref_inv.shape)}"
            )
            continue
        forward, matched = ref_scale.clone(), inv == ref_inv
        for keys, scale, cand in deviating:
            hit = ~matched & (inv == cand)
            if bool(hit.any()):
                for key in keys:
                    check.count_known_deviation(key, int(hit.sum()))
            forward, matched = torch.where(hit, scale, forward), matched | hit
        if not bool(matched.all()):
            at = (~matched).nonzero()[:_SHOWN].tolist()
            check.problems.append(
                f"{name} ({fmt}): {int((~matched).sum())} of {matched.numel()} inverse scales are neither the "
                f"reference's nor a named deviation's, at blocks {at}: {[inv[tuple(i)].item() for i in at]}, "
                f"the reference's {[ref_inv[tuple(i)].item() for i in at]}"
            )
            continue
        y = (w.float() * expand(forward, w.shape, BLOCK)).clamp(-E4M3FN.max, E4M3FN.max)
        want = encode(y, E4M3FN, saturate=True)
        if not torch.equal(codes, want):
            check.problems.append(
                f"{name} ({fmt}): {int((codes != want).sum())} of {want.numel()} codes differ: {_hexes(codes, want)}"
            )
    return check


def passes_through(quantize: Quantize = hf.quantize) -> dict[str, str]:
    """What the quantizer does with weights 128 x 128 blocks do not divide (no definition says:
    observed): ``quantized`` or ``passes through``, per shape."""
    shapes = {"448x200": (448, 200), "576x256": (576, 256), "100x128": (100, 128), "128": (128,)}
    out = {}
    for name, shape in shapes.items():
        w = torch.ones(shape, dtype=torch.bfloat16)
        out[name] = "passes through" if quantize(w, BLOCK, "float") is None else "quantized"
    return out


def _stored(ref: BlockFp8) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    return ref.codes, ref.scale_inv, stored_dtype(ref.scale_fmt)


Loader = Callable[..., torch.Tensor]


def judge_loaded(check: BlockCheck, name: str, got: torch.Tensor, q: BlockFp8, dtype: torch.dtype) -> None:
    """One weight as a loader gave it (``got``) against the reference's dequantization of ``q`` into
    ``dtype``: ``observed[name]`` ``definition``, or the loader-blocks deviation's exact answer
    (excused, its elements counted; on a weight whose blocks are whole it is the definition's), or
    a problem."""
    want = q.dequantize(dtype)
    if got.dtype != dtype or got.shape != want.shape:
        check.problems.append(f"{name}: loaded as {got.dtype} {tuple(got.shape)}, expected {dtype} {tuple(want.shape)}")
    elif torch.equal(got, want):
        check.observed[name] = "definition"
    elif torch.equal(got, TRANSFORMERS_LOADER_BLOCKS_FROM_GRID.answer(decode(q.codes, E4M3FN), q.scale_inv).to(dtype)):
        check.count_known_deviation(TRANSFORMERS_LOADER_BLOCKS_FROM_GRID.key, int((got != want).sum()))
        check.observed[name] = f"deviates: {int((got != want).sum())} of {want.numel()} values"
    else:
        check.problems.append(
            f"{name} ({q.scale_fmt}, {dtype}): {int((got != want).sum())} of {want.numel()} loaded values differ "
            f"from the reference's dequantization, max |diff| {(got.float() - want.float()).abs().max().item():.3e}"
        )


def check_loader(dtype: torch.dtype, scale_fmt: ScaleFormat | str, loader: Loader = hf.loader_dequantize) -> BlockCheck:
    """The loader (``from_pretrained(..., dequantize=True)``) on checkpoints the reference wrote,
    every weight, judged by ``judge_loaded``. Every weight is one the loader claims to load: an
    error is a failure, but for the named deviation's exact error where the grid does not divide
    the shape (excused and observed: ``<weight>: deviates: raises ...``)."""
    check = BlockCheck()
    for name, w in weights().items():
        ref = quantize_blocks(w, BLOCK, scale_fmt)
        codes, inv, scale_dtype = _stored(ref)
        got = loaded_or_deviating_error(functools.partial(loader, codes, inv, dtype, scale_dtype), codes, inv)
        if isinstance(got, str):
            check.count_known_deviation(TRANSFORMERS_LOADER_BLOCKS_FROM_GRID.key, codes.numel())
            check.observed[name] = f"deviates: raises {got}"
            continue
        judge_loaded(check, name, got, ref, dtype)
    return check


def loaded_or_deviating_error(
    load: Callable[[], torch.Tensor], codes: torch.Tensor, scale_inv: torch.Tensor
) -> torch.Tensor | str:
    """``load()``'s tensor; or, where the loader deviation (``TRANSFORMERS_LOADER_BLOCKS_FROM_GRID``)
    answers this shape with an error and ``load`` raises exactly that error, its words. Any other
    error propagates: the loader claims to load every weight a checkpoint holds."""
    expected = TRANSFORMERS_LOADER_BLOCKS_FROM_GRID.error(tuple(codes.shape), tuple(scale_inv.shape))
    try:
        return load()
    except Exception as exc:  # noqa: BLE001 - only the deviation's exact error is kept, the rest re-raised
        if expected is None or describe(exc) != expected:
            raise
        return expected


def check_backward(
    dtype: torch.dtype, scale_fmt: ScaleFormat | str, backward: Loader = hf.backward_dequantize
) -> BlockCheck:
    """The backward's dequantized weight, every weight ragged or not: bitwise the reference's in
    ``dtype``, or the scale-in-gradient-dtype deviation's exact answer (its elements counted)."""
    check = BlockCheck()
    for name, w in weights().items():
        ref = quantize_blocks(w, BLOCK, scale_fmt)
        got = backward(*_stored(ref)[:2], dtype, _stored(ref)[2])
        want = ref.dequantize(dtype)
        if torch.equal(got, want):
            continue
        answer = TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE.answer(
            decode(ref.codes, E4M3FN), expand(ref.scale_inv, ref.codes.shape, BLOCK), dtype
        )
        if torch.equal(got, answer):
            check.count_known_deviation(TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE.key, int((got != want).sum()))
            continue
        check.problems.append(
            f"{name} ({scale_fmt}, {dtype}): {int((got != want).sum())} of {want.numel()} values of the backward's "
            f"weight differ from the reference's, max |diff| {(got.float() - want.float()).abs().max().item():.3e}"
        )
    return check


def check_lora_input_grad(
    dtype: torch.dtype, scale_fmt: ScaleFormat | str, lora: Loader = hf.lora_input_grad
) -> BlockCheck:
    """A LoRA step's input gradient through a frozen FP8 layer (448 x 200, ragged): ``g @ W`` with
    W the reference's dequantized weight (or the backward deviation's exact weight, excused), the
    same matmul: bitwise."""
    check = BlockCheck()
    ref = quantize_blocks(weights()["448x200"], BLOCK, scale_fmt)
    g = torch.randn(16, 448, generator=torch.Generator().manual_seed(22)).to(dtype)
    got = lora(*_stored(ref)[:2], g, _stored(ref)[2])
    want = g @ ref.dequantize(dtype)
    if torch.equal(got, want):
        return check
    weight = TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE.answer(
        decode(ref.codes, E4M3FN), expand(ref.scale_inv, ref.codes.shape, BLOCK), dtype
    )
    if torch.equal(got, g @ weight):
        check.count_known_deviation(TRANSFORMERS_BACKWARD_SCALE_IN_GRAD_DTYPE.key, int((got != want).sum()))
        return check
    check.problems.append(
        f"448x200 ({scale_fmt}, {dtype}): the input gradient differs from g @ the reference's weight by up to "
        f"{(got.float() - want.float()).abs().max().item():.3e} ({int((got != want).sum())} of {want.numel()})"
    )
    return check
