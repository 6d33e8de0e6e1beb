"""A new family is a room and one registry line: a stand-in room (``standin_room``: one probe,
one meaning, one check) registered by appending its line shows its key in the profile, in the
upgrade report with its meaning, and in the coverage of meanings, with no other edit."""

from __future__ import annotations

import pytest

from fp8ref.harness.profiles import families, profile, upgrade_report
from fp8ref.harness.profiles.key_meanings import meaning_of
from tests.meta.standin_room import checks

KEY = "standin.e4m3fn.exact_value"


@pytest.fixture
def registered(monkeypatch):
    """The registry with the stand-in's line appended, and only that family probed (collecting
    every family takes seconds and proves nothing more here)."""
    line = families.Family("tests.meta.standin_room")
    monkeypatch.setattr(families, "FAMILIES", [*families.FAMILIES, line])
    return line


def test_its_key_is_collected_into_the_profile(registered, monkeypatch):
    monkeypatch.setattr(families, "FAMILIES", [registered])
    assert profile.collect("cpu")["behaviour"] == {KEY: "exact"}


def test_its_key_has_its_meaning(registered):
    row, parts = meaning_of(KEY)
    assert families.owner_of(KEY) == registered and row.family == "stand-in family" and parts == ("e4m3fn",)


def test_a_change_of_its_key_reaches_the_upgrade_report(registered, monkeypatch):
    monkeypatch.setattr(families, "FAMILIES", [registered])
    before = profile.collect("cpu")
    monkeypatch.setitem(checks.ANSWER, "ok", False)
    after = profile.collect("cpu")
    assert checks.check_exact_value() is not None  # the check itself catches the changed answer
    (change,) = upgrade_report.build(before, after)["changes"]
    assert change["key"] == KEY and change["severity"] == "numerics"
    assert change["meaning"] == "what 1.125 becomes in e4m3fn", change


def test_without_its_line_the_key_has_no_meaning():
    assert families.owner_of(KEY) is None and meaning_of(KEY) is None


def test_a_family_writing_a_key_it_does_not_own_fails_the_profile(registered, monkeypatch):
    """Its key would otherwise take the casts family's meaning (or overwrite its value)."""
    from tests.meta.standin_room import profile_keys

    monkeypatch.setattr(families, "FAMILIES", [registered])
    monkeypatch.setattr(profile_keys, "collect", lambda where: {"cast.e4m3fn.bf16.overflow": "saturate"})
    with pytest.raises(RuntimeError, match=r"standin_room family's probes wrote keys it does not own: \['cast"):
        profile.collect("cpu")


def test_a_family_with_traces_keeps_them_beside_its_keys_and_only_for_its_keys(registered, monkeypatch):
    """A room may keep the traced calls behind its keys (``traces(where)``, as the workloads'
    does): they go to the profile's ``traces``; traces for a key it did not write fail the profile."""
    from tests.meta.standin_room import profile_keys

    monkeypatch.setattr(families, "FAMILIES", [registered])
    assert profile.collect("cpu")["traces"] == {}
    line = "aten._to_copy.default cast | float32[1]()#00 | float8_e4m3fn[1]()#39 | standin.py:1"
    monkeypatch.setattr(profile_keys, "traces", lambda where: {KEY: [line]}, raising=False)
    assert profile.collect("cpu")["traces"] == {KEY: [line]}
    monkeypatch.setattr(profile_keys, "traces", lambda where: {"standin.other": [line]}, raising=False)
    with pytest.raises(RuntimeError, match=r"standin_room family traced keys it did not write: \['standin.other'\]"):
        profile.collect("cpu")
