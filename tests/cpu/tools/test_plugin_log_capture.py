"""pytest's log capture in this suite (tests/plugins/log_capture.py): off unless a logging option
asks for it, a library's warning still in the test's captured stderr, and a test that reads
``caplog`` told how to get it."""

import logging
import types

import pytest

from tests.plugins import log_capture


def _config(options: dict | None = None, ini: dict | None = None) -> types.SimpleNamespace:
    options, ini = options or {}, ini or {}
    return types.SimpleNamespace(
        getoption=lambda name, default=None: options.get(name, default),
        getini=lambda name: ini.get(name, False if name == "log_cli" else ""),
    )


def test_this_run_has_pytests_log_capture_exactly_when_a_logging_option_asks(request):
    registered = request.config.pluginmanager.get_plugin(log_capture.PLUGIN) is not None
    assert registered == log_capture.wanted(request.config), (registered, log_capture.wanted(request.config))


@pytest.mark.parametrize(
    "options, ini",
    [
        ({"log_level": "INFO"}, {}),
        ({"log_cli_level": "DEBUG"}, {}),
        ({"log_file": "run.log"}, {}),
        ({"log_file_level": "INFO"}, {}),
        ({}, {"log_cli": True}),
        ({}, {"log_level": "WARNING"}),
        ({}, {"log_file": "run.log"}),
    ],
    ids=["--log-level", "--log-cli-level", "--log-file", "--log-file-level", "log_cli", "ini level", "ini file"],
)
def test_any_logging_option_keeps_the_capture(options, ini):
    assert log_capture.wanted(_config(options, ini))


def test_no_logging_option_turns_the_capture_off():
    assert not log_capture.wanted(_config())


def test_a_librarys_warning_reaches_the_tests_captured_stderr(request, capsys):
    """With no handler of pytest's (nor anyone's) on the root logger, Python's last-resort handler
    writes a warning to the sys.stderr of the moment: the one pytest captures for the report."""
    if request.config.pluginmanager.get_plugin(log_capture.PLUGIN) is not None:
        pytest.skip("pytest's log capture is on in this run (a logging option): it captures the warning itself")
    logging.getLogger("fp8ref.tests.log_capture").warning("a library's warning, seen in the report")
    assert "a library's warning, seen in the report" in capsys.readouterr().err


def test_a_test_reading_caplog_without_the_capture_is_a_usage_error_naming_it():
    config = types.SimpleNamespace(pluginmanager=types.SimpleNamespace(get_plugin=lambda name: None))
    items = [
        types.SimpleNamespace(nodeid="t.py::test_plain", fixturenames=["tmp_path"]),
        types.SimpleNamespace(nodeid="t.py::test_logs", fixturenames=["caplog"]),
    ]
    with pytest.raises(pytest.UsageError, match=r"t\.py::test_logs reads caplog.*--log-level"):
        log_capture.pytest_collection_modifyitems(config, items)
    log_capture.pytest_collection_modifyitems(config, items[:1])
