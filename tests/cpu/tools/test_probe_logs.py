"""fp8ref's own probing keeps library loggers quiet: torch's DCP event logger (one record per
save and load, an ERROR record for each refused save) is disabled while fp8ref saves through
DCP, and as it was afterwards. A profile collects 256 such records (its checkpoint probe's
refused saves of torchao tensors, torch 2.13): wherever a handler catches that logger they
buried a failing golden test's differing keys."""

import logging
import tempfile
import warnings

import pytest
import torch

from fp8ref.harness.state import keeping


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _dcp_loggers() -> list[logging.Logger]:
    """torch's DCP event logger(s), ``c10d-<handler>-dcp_logger`` (torch/distributed/c10d_logger.py)."""
    import torch.distributed.checkpoint  # noqa: F401 - creates the logger

    found = [
        logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger) and name.endswith("dcp_logger")
    ]
    assert found, "torch.distributed.checkpoint created no '*dcp_logger' logger: where does it log now?"
    return found


@pytest.fixture
def kept():
    """A handler on the DCP logger (as a user's logging setup may attach), removed afterwards."""
    handler = _Kept()
    loggers = _dcp_loggers()
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


def _state() -> tuple[dict, dict]:
    return {"t": torch.arange(8, dtype=torch.float32)}, {"t": torch.zeros(8)}


def test_fp8refs_dcp_round_trip_logs_nothing_and_the_logger_logs_again_after(kept):
    import torch.distributed.checkpoint as dcp

    state, into = _state()
    assert torch.equal(keeping.dcp_saved_and_loaded(state, into)["t"], state["t"])
    names = sorted({r.name for r in kept.records})
    assert kept.records == [], f"expected no DCP records while fp8ref saves, got {len(kept.records)} from {names}"
    # the control: the same save outside fp8ref's probing still logs (the logger was restored,
    # and the handler would have caught the records above)
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (DCP assumes one process without a process group)
        dcp.save(state, checkpoint_id=folder)
    assert kept.records, "a DCP save outside fp8ref's probing logged nothing: the control shows nothing"


def test_a_logger_disabled_before_stays_disabled_after():
    loggers = _dcp_loggers()
    before = [logger.disabled for logger in loggers]
    try:
        for logger in loggers:
            logger.disabled = True
        with keeping.dcp_logs_silenced():
            pass
        assert all(logger.disabled for logger in loggers), "a logger the user disabled was enabled again"
    finally:
        for logger, was in zip(loggers, before):
            logger.disabled = was
