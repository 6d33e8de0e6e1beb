"""The garbage collector during the tests: the collected session's objects set aside, full
collections ten times rarer.

After collection, the interpreter holds torch, transformers, torch's op catalogue and every test
item: millions of objects that live until the process ends, and that each full collection walks
again. Measured in the default tier (docs/timings.md): 4.2-5.2 s of collections a warm run, 3.2-3.8
s of them full ones. ``gc.freeze()`` once collection is over moves what is alive then into the
permanent generation (the documented use: long-lived objects created up front), and a third
threshold of 100 instead of 10 (young collections between full ones) makes the full collections of
what the tests create rarer: 2.4-2.9 s of collections. Cyclic garbage is still collected by the
young generations and by the full collections left; nothing frozen is garbage yet (it is
reachable when frozen). Both are put back when the session ends, so pytest's own collections
at exit, and a run that embeds pytest, see the collector as they left it.
"""

from __future__ import annotations

import gc

import pytest

FULL_EVERY = 100  # young (generation 1) collections between two full ones; Python's default is 10

_tuned: dict[str, object] = {}  # "by": the session that tuned it, "thresholds": what it found


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if _tuned:  # (a session run inside another's tests: the outer one tuned it, and puts it back)
        return
    young, middle, full = gc.get_threshold()
    _tuned.update(by=session, thresholds=(young, middle, full))
    gc.freeze()
    gc.set_threshold(young, middle, FULL_EVERY)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _tuned.get("by") is session:
        gc.set_threshold(*_tuned["thresholds"])  # type: ignore[misc]
        gc.unfreeze()
        _tuned.clear()
