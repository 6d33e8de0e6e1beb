"""Python scalars in float8 arithmetic and comparisons (fp8ref/harness/native/scalar_ops.py):
``t * 0.5``, ``s - t``, ``t.mul_(2)``, ``t ** 0.5``, ``clamp``, ``t == 0``, on every code of every
float8 dtype, with scalars float8 holds exactly and ones it does not, past max, below the
smallest subnormal, inf and NaN.

Each answer must be the definition's under one of two semantics: the scalar taken exactly, or
rounded into the dtype first as ``.to`` writes it (torch's rule for float16 and bfloat16
comparisons too). Which one an install uses is pinned (``native.scalar.<op>``); an answer that is
neither fails naming the codes. Why a pinned key may differ: a release adds a float8 kernel for
scalar arithmetic (today refused on CPU), or starts taking the scalar exactly."""

import pytest

from fp8ref.harness.native.native_ops import matrix_word
from fp8ref.harness.native.scalar_ops import SCALAR_OPS, check_scalar_op, profile_value
from fp8ref.harness.stack import install, probes

FORMATS = {f.name: f for f in probes.float8_formats()}


@pytest.fixture(scope="module")
def checks():
    """Every op on every float8 dtype, checked once: {(op, format): ScalarCheck}."""
    return {(name, fmt): check_scalar_op(name, FORMATS[fmt]) for name in SCALAR_OPS for fmt in FORMATS}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_python_scalar_in_float8_arithmetic_gives_the_definitions_answer(fmt, checks, record_observation):
    mine = [c for (_, f), c in checks.items() if f == fmt]
    ran = {c.op: profile_value(c) for c in mine if c.semantics}
    record_observation(f"Python scalars into {fmt}: ops that run", " ".join(f"{k}={v}" for k, v in ran.items()))
    bad = [p for c in mine for p in c.problems]
    assert not bad, f"{install.versions_line()}:\n" + "\n".join(bad[:8])


def test_the_python_scalar_account(checks, record_section):
    """The end-of-run account: per op, what each float8 dtype does with a Python scalar."""
    rows = {name: matrix_word({f: profile_value(checks[name, f]) for f in FORMATS}) for name in SCALAR_OPS}
    ran = [n for n, w in rows.items() if w != "all refused"]
    lines = [f"{len(rows)} ops x {len(FORMATS)} float8 dtypes: {len(ran)} ops run on some dtype, each checked"]
    lines += [f"  {name}: {w}" for name, w in rows.items()]
    record_section(f"Python scalars in float8 arithmetic on cpu ({install.versions_line()})", lines)
    assert not any("differs" in w for w in rows.values()), rows
