"""The garbage collector during the tests (tests/plugins/gc_tuning.py): the collected session's
objects frozen and full collections rarer while the tests run, and both put back at the end."""

import gc
import types

from tests.plugins import gc_tuning


def test_the_tests_run_with_the_session_frozen_and_full_collections_rarer():
    assert gc.get_freeze_count() > 100_000, gc.get_freeze_count()  # (torch alone is more)
    assert gc.get_threshold()[2] == gc_tuning.FULL_EVERY


def test_a_session_puts_back_what_it_tuned_and_leaves_an_outer_sessions_alone():
    outer_state = dict(gc_tuning._tuned)
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    inner = types.SimpleNamespace()
    try:
        gc_tuning._tuned.clear()  # (as if no session had tuned it yet)
        gc.set_threshold(700, 10, 10)
        gc_tuning.pytest_collection_finish(inner)
        assert gc.get_threshold() == (700, 10, gc_tuning.FULL_EVERY)
        other = types.SimpleNamespace()
        gc_tuning.pytest_collection_finish(other)  # (nested: nothing)
        gc_tuning.pytest_sessionfinish(other)
        assert gc.get_threshold() == (700, 10, gc_tuning.FULL_EVERY)
        gc_tuning.pytest_sessionfinish(inner)
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
    finally:
        gc_tuning._tuned.clear()
        gc_tuning._tuned.update(outer_state)
        gc.set_threshold(*before)
        gc.freeze()  # (what the run froze is frozen again: everything alive now, a superset)
        assert gc.get_freeze_count() >= frozen
