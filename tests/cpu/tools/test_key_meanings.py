"""Every key a behaviour profile holds has a written meaning, consequence and severity in its
family's room (fp8ref/harness/<room>/meanings.py, the families registered in
fp8ref/harness/profiles/families.py): the golden's keys, the keys the installs CI runs are known to
differ in, and every key this install's profile holds. A new probe's key without a row fails
here, naming it."""

import json
import re
from collections.abc import Iterable

import pytest

from fp8ref.harness.profiles import families
from fp8ref.harness.profiles.key_meanings import SEVERITIES, KeyMeaning, all_meanings, describe, meaning_of, severity_of
from tests.common.paths import GOLDEN


def _golden_keys() -> set[str]:
    keys = set(json.loads((GOLDEN / "cpu.json").read_text())["behaviour"])
    for entry in json.loads((GOLDEN / "cpu-installs.json").read_text()).values():
        keys |= set(entry["differences"])
    return keys


def _unexplained(keys: Iterable[str]) -> list[str]:
    return sorted(k for k in keys if meaning_of(k) is None)


TABLE = "the owning family's fp8ref/harness/<room>/meanings.py"


def test_every_key_of_the_golden_and_of_the_named_installs_has_a_meaning():
    missing = _unexplained(_golden_keys())
    assert not missing, f"no row of {TABLE} explains {len(missing)} keys: {missing[:10]}"


def test_every_key_of_this_installs_profile_has_a_meaning(cpu_profile):
    missing = _unexplained(cpu_profile["behaviour"])
    assert not missing, f"no row of {TABLE} explains {len(missing)} keys: {missing[:10]}"


def test_the_keys_an_install_without_torchao_or_a_dtype_writes_have_a_meaning():
    """What the profile writes in place of a probe's keys when the install lacks its subject."""
    for key in ("torchao", "checkpoint.torchao", "cast.e8m0fnu", "finfo.e4m3fnuz", "finfo.float4_e2m1fn_x2"):
        found = meaning_of(key)
        assert found is not None and found[0].severity == "refusal", (key, found)


def test_each_meaning_reads_whole_for_its_key():
    """The texts filled in for each golden key: no placeholder left unfilled."""
    unfilled = []
    for key in sorted(_golden_keys()):
        row, parts = meaning_of(key)
        unfilled += [(key, row.pattern, t) for t in describe(row, parts) if not t or re.search(r"\{\d+\}", t)]
    assert not unfilled, unfilled[:5]


def test_a_key_without_a_meaning_is_found():
    assert meaning_of("cast.e4m3fn.bf16.some_new_probe") is None
    assert meaning_of("a_new_family.x") is None


def test_the_first_matching_row_wins_and_parts_are_captured():
    row, parts = meaning_of("cast.e4m3fn.copy_from_f64.rounding")
    assert row.pattern == "cast.*.copy_from_f64.rounding" and parts == ("e4m3fn",)
    row, parts = meaning_of("checkpoint.torchao.mx_fp4.tensor_flatten/unflatten")
    assert row.pattern == "checkpoint.torchao.*.**" and parts == ("mx_fp4", "tensor_flatten/unflatten")
    assert "bfloat16" in describe(*meaning_of("cast.e5m2.bf16.overflow"))[0]


def test_severity_follows_refusals_before_the_rows_own():
    row = meaning_of("cast.e4m3fn.bf16.overflow")[0]
    assert severity_of(row, "saturate", "nonsaturate") == "numerics"
    assert severity_of(row, "saturate", "refused: RuntimeError: x") == "refusal"
    assert severity_of(row, "<absent>", "saturate") == "refusal"
    assert severity_of(row, "refused: ValueError: a", "refused: RuntimeError: b") == "cosmetic"
    nan = meaning_of("cast.e4m3fn.bf16.nan_codes")[0]
    assert severity_of(nan, "0x7f", "0xff") == "cosmetic"


def test_rows_are_well_formed():
    rows = all_meanings()
    assert len({r.pattern for r in rows}) == len(rows), "a pattern is written twice"
    for row in rows:
        assert row.severity in SEVERITIES and row.family and row.meaning and row.consequence, row
    with pytest.raises(ValueError, match="severity"):
        KeyMeaning("x.*", "f", "m", "c", "harmless")
    with pytest.raises(ValueError, match=r"'\*\*' only as its last part"):
        _ = KeyMeaning("x.**.y", "f", "m", "c", "cosmetic").regex
    with pytest.raises(TypeError, match="key"):
        meaning_of(3)


def _namespace(pattern: str) -> str:
    """The literal dotted prefix of a row's pattern, before its first ``*``."""
    return pattern.split("*", 1)[0].rstrip(".")


def test_each_familys_rows_lie_inside_the_namespaces_it_owns():
    """A row of one family can never explain another family's key: its pattern's literal prefix
    is owned by its own family (the longest owned namespace wins, as for keys)."""
    strays = [
        (family.name, row.pattern)
        for family in families.FAMILIES
        for row in family.meanings().MEANINGS
        if families.owner_of(_namespace(row.pattern)) != family
    ]
    assert not strays, f"rows outside their family's namespaces: {strays}"


def test_namespaces_are_owned_once():
    owned = [ns for family in families.FAMILIES for ns in family.meanings().OWNS]
    assert len(owned) == len(set(owned)), sorted(owned)
