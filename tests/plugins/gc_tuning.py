"""The garbage collector during the tests: the collected session's objects set aside, full
collections rarer.

After collection, the interpreter holds torch, transformers, torch's op catalogue and every test
item: millions of objects that live until the process ends, and that each full collection walks
again. Measured in the default tier (docs/timings.md): 4.2-5.2 s of collections a warm run, 3.2-3.8
s of them full ones. Once collection is over, a full collection, then ``gc.freeze()``, moves what
is alive then into the permanent generation (the documented use: long-lived objects created up
front), and a third threshold of 100 instead of 10 (young collections between two full ones; a
full one also waits for the objects pending to reach a quarter of the long-lived ones) makes the
full collections of what the tests create rarer: 2.4-2.9 s of collections. What a test leaves as
cyclic garbage is still collected, by the young generations and by the full collections left;
what was frozen and becomes garbage later waits for the session's end (no more than was frozen).

Both are put back when the session that tuned them ends, even when another plugin's session end
fails, so pytest's own collections at exit, and a later session in the same interpreter, see
the collector as they left it. An interpreter that froze objects itself before the session (an
embedder's choice) is left alone: unfreezing at the end would undo its freeze.
"""

from __future__ import annotations

import gc
from collections.abc import Generator

import pytest

FULL_EVERY = 100  # young (generation 1) collections between two full ones; Python's default is 10

_tuned: dict[str, object] = {}  # "by": the session that tuned it, "thresholds": what it found


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if _tuned or gc.get_freeze_count():  # (an outer session tuned it; someone else froze objects)
        return
    young, middle, full = gc.get_threshold()
    _tuned.update(by=session, thresholds=(young, middle, full))
    gc.collect()  # (only what is alive is frozen)
    gc.freeze()
    gc.set_threshold(young, middle, FULL_EVERY)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:
        if _tuned.get("by") is session:
            gc.set_threshold(*_tuned["thresholds"])  # type: ignore[misc]
            gc.unfreeze()
            _tuned.clear()
