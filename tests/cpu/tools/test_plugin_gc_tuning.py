"""The garbage collector during the tests (tests/plugins/gc_tuning.py): the collected session's
objects frozen and full collections rarer while the tests run, and both put back at the end by
the session that tuned them. Past the first test, a stand-in for the ``gc`` module: the run's own
collector is never touched."""

import gc
import types

import pytest

from tests.plugins import gc_tuning


class _Collector:
    """What the plugin calls of ``gc``, recorded."""

    def __init__(self, frozen: int = 0) -> None:
        self.threshold, self.frozen = (700, 10, 10), frozen
        self.calls: list[str] = []

    def get_threshold(self):
        return self.threshold

    def set_threshold(self, *threshold):
        self.threshold = threshold

    def get_freeze_count(self):
        return self.frozen

    def collect(self):
        self.calls.append("collect")

    def freeze(self):
        self.calls.append("freeze")
        self.frozen = 1000

    def unfreeze(self):
        self.calls.append("unfreeze")
        self.frozen = 0


@pytest.fixture
def collector(monkeypatch):
    fake = _Collector()
    monkeypatch.setattr(gc_tuning, "gc", fake)
    monkeypatch.setattr(gc_tuning, "_tuned", {})  # (as if no session had tuned it yet)
    return fake


def _finish(session: object, fails: bool = False) -> None:
    """The session-end wrapper around the other plugins' session ends (which fail if ``fails``)."""
    run = gc_tuning.pytest_sessionfinish(session)  # type: ignore[arg-type]
    next(run)
    if fails:
        with pytest.raises(RuntimeError, match="another plugin"):
            run.throw(RuntimeError("another plugin's session end"))
    else:
        with pytest.raises(StopIteration):
            run.send(None)


def test_the_tests_run_with_the_session_frozen_and_full_collections_rarer():
    assert gc.get_freeze_count() > 100_000, gc.get_freeze_count()  # (torch alone is more)
    assert gc.get_threshold()[2] == gc_tuning.FULL_EVERY


def test_a_session_tunes_it_once_and_puts_back_what_it_found(collector):
    inner, nested = types.SimpleNamespace(), types.SimpleNamespace()
    gc_tuning.pytest_collection_finish(inner)
    assert collector.calls == ["collect", "freeze"] and collector.threshold == (700, 10, gc_tuning.FULL_EVERY)
    gc_tuning.pytest_collection_finish(nested)  # (a session inside the tests: nothing)
    _finish(nested)
    assert collector.calls == ["collect", "freeze"] and collector.threshold == (700, 10, gc_tuning.FULL_EVERY)
    _finish(inner)
    assert collector.calls[-1] == "unfreeze" and collector.threshold == (700, 10, 10) and collector.frozen == 0
    assert gc_tuning._tuned == {}  # (a later session in the same interpreter tunes it again)


def test_the_collector_is_put_back_when_another_plugins_session_end_fails(collector):
    session = types.SimpleNamespace()
    gc_tuning.pytest_collection_finish(session)
    _finish(session, fails=True)
    assert collector.threshold == (700, 10, 10) and collector.frozen == 0 and gc_tuning._tuned == {}


def test_an_interpreter_that_froze_objects_itself_is_left_alone(collector):
    collector.frozen = 5  # (an embedder's freeze before the session)
    session = types.SimpleNamespace()
    gc_tuning.pytest_collection_finish(session)
    _finish(session)
    assert collector.calls == [] and collector.threshold == (700, 10, 10) and collector.frozen == 5
