"""The native family's profile keys: which of torch's catalogued ops run on each float8 dtype,
what each way of writing a value into float8 does, the named native-op deviations
(``native.*``), Python scalars in float8 arithmetic (``native.scalar.*``), and the FP8 API surface:
type promotion, ``a + b`` with every dtype, the scaled GEMM ops' schemas (``surface.*``).
What each key means: ``meanings.py``."""

from __future__ import annotations

from ..stack import probes
from ..stack.probing import Where

__all__ = ["collect", "native_op_keys", "scalar_op_keys", "surface_keys"]


def collect(where: Where) -> dict:
    return native_op_keys(where.device) | scalar_op_keys(where.device) | surface_keys(where.device)


def native_op_keys(device: str) -> dict:
    """Which of torch's catalogued ops run on each float8 dtype (``native_ops.support_matrix``:
    ``native.<op>`` for each op that runs on one at least), what each way of writing a value into float8 does with it
    (``native.written.<format>.<path>``: as ``.to`` or not, what it refuses), and whether the
    install still gives each named native-op deviation (``native.deviation.<key>``: where it
    deviates, or ``definition``)."""
    from ..casts.deviations import NATIVE_OP_DEVIATIONS
    from . import native_ops
    from .native_checks import check_op, check_written

    refusal = native_ops.catalogue_refusal()
    if refusal is not None:
        return {"native": refusal}
    matrix = native_ops.support_matrix(device)
    # the ops that run on some float8 dtype: one refused everywhere has no key, so a kernel a release
    # adds is a key that appears, and the catalogue's own churn (ops it adds or drops) is no line
    out = {
        f"native.{name}": native_ops.matrix_word(row)
        for name, row in matrix.items()
        if any(word in ("runs", "partial") for word in row.values())
    }
    formats = {f.name: f for f in probes.float8_formats()}
    for fmt in formats.values():  # values written from Python scalars and other dtypes
        out.update({f"native.written.{fmt.name}.{how}": word for how, word in check_written(fmt, device).items()})
    for dev in NATIVE_OP_DEVIATIONS:
        runs = [f for f in dev.formats if f in formats and matrix.get(dev.op, {}).get(f) in ("runs", "partial")]
        where = [f for f in runs if check_op(dev.op, formats[f], device).known_deviations.get(dev.key)]
        word = f"deviates on {' '.join(where)}" if where else ("definition" if runs else "refused")
        out[f"native.deviation.{dev.key}"] = word
    return out


def scalar_op_keys(device: str) -> dict:
    """Python scalars in float8 arithmetic and comparisons (``native.scalar.<op>``, over the float8
    dtypes): refused, or whether the scalar takes part exactly or rounded into the dtype first
    (``scalar_ops``; an answer that is neither reads ``differs``)."""
    from .native_ops import matrix_word
    from .scalar_ops import SCALAR_OPS, check_scalar_op, profile_value

    formats = probes.float8_formats()
    return {
        f"native.scalar.{name}": matrix_word({f.name: profile_value(check_scalar_op(name, f, device)) for f in formats})
        for name in SCALAR_OPS
    }


def surface_keys(device: str) -> dict:
    """The FP8 API surface (``surface.collect``): type promotion of each float8 dtype, Python
    scalars with it, ``a + b`` with every other dtype, the scaled GEMM ops' schemas and enums."""
    from . import surface

    return surface.collect(device)
