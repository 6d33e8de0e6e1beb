"""pytest's log capture in this suite (tests/plugins/log_capture.py): off unless a logging option
asks for it, a library's warning still in the test's captured stderr, and a test that reads
``caplog`` told how to get it."""

import logging
import types
from typing import Any

import pytest

from tests.plugins import log_capture


def _config(options: dict | None = None, ini: dict | None = None, logging_loaded: bool = True) -> Any:
    options, ini = options or {}, ini or {}
    blocked: list[str] = []

    def getini(name):
        if not logging_loaded:  # (as pytest says of a setting nobody declared)
            raise ValueError(f"unknown configuration value: {name!r}")
        return ini.get(name, log_capture.INI_DEFAULTS[name])

    return types.SimpleNamespace(
        getoption=lambda name, default=None: options.get(name, default),
        getini=getini,
        pluginmanager=types.SimpleNamespace(has_plugin=lambda name: logging_loaded, set_blocked=blocked.append),
        blocked=blocked,
    )


def test_this_run_has_pytests_log_capture_exactly_when_a_logging_option_asks(request):
    registered = request.config.pluginmanager.get_plugin(log_capture.PLUGIN) is not None
    wanted = log_capture.wanted(request.config)
    assert registered == wanted, (registered, wanted)


@pytest.mark.parametrize(
    "options, ini",
    [
        ({"log_level": "INFO"}, {}),
        ({"log_level": "0"}, {}),
        ({"log_cli_level": "DEBUG"}, {}),
        ({"log_file": "run.log"}, {}),
        ({"log_file_level": "INFO"}, {}),
        ({"log_format": "%(message)s"}, {}),
        ({"logger_disable": ["torch"]}, {}),
        ({}, {"log_cli": True}),
        ({}, {"log_level": "WARNING"}),
        ({}, {"log_level": 0}),
        ({}, {"log_file": "run.log"}),
        ({}, {"log_format": "%(message)s"}),
        ({}, {"log_file_mode": "a"}),
    ],
    ids=[
        "--log-level",
        "--log-level=0",
        "--log-cli-level",
        "--log-file",
        "--log-file-level",
        "--log-format",
        "--log-disable",
        "log_cli",
        "ini level",
        "ini level 0",
        "ini file",
        "ini format",
        "ini file mode",
    ],
)
def test_any_logging_option_keeps_the_capture(options, ini):
    config = _config(options, ini)
    assert log_capture.wanted(config)
    log_capture.pytest_configure(config)
    assert config.blocked == []


@pytest.mark.parametrize("ini", [{}, {"log_level": ""}, {"log_file": ""}], ids=["nothing", "empty level", "empty file"])
def test_no_logging_option_turns_the_capture_off(ini):
    config = _config(ini=ini)
    assert not log_capture.wanted(config)
    log_capture.pytest_configure(config)
    assert config.blocked == [log_capture.PLUGIN]


def test_without_pytests_logging_plugin_nothing_is_blocked_or_read():
    """-p no:logging: its settings are not declared (reading one raises), so nothing is read."""
    config = _config(logging_loaded=False)
    log_capture.pytest_configure(config)
    assert config.blocked == []


def test_the_settings_read_are_every_setting_of_pytests_logging_group():
    """pytest's own declarations (its logging plugin's pytest_addoption, run against a recorder):
    a setting pytest adds, drops or gives another default fails here, not silently in a run."""
    from _pytest import logging as pytest_logging

    ini: dict[str, object] = {}
    dests: list[str] = []
    group = types.SimpleNamespace(addoption=lambda *names, **kw: dests.append(kw["dest"]))
    parser = types.SimpleNamespace(
        getgroup=lambda name, *a, **kw: group,
        addini=lambda name, *a, **kw: ini.__setitem__(name, kw.get("default")),
    )
    pytest_logging.pytest_addoption(parser)
    assert ini == log_capture.INI_DEFAULTS
    assert sorted(dests) == sorted([n for n in ini if n != "log_cli"] + list(log_capture.OPTION_ONLY))


def test_a_librarys_warning_reaches_the_tests_captured_stderr(request, capsys):
    """With no handler of pytest's (nor anyone's) on the root logger, Python's last-resort handler
    writes a warning to the sys.stderr of the moment: the one pytest captures for the report."""
    if request.config.pluginmanager.get_plugin(log_capture.PLUGIN) is not None:
        pytest.skip("pytest's log capture is on in this run (a logging option): it captures the warning itself")
    logging.getLogger("fp8ref.tests.log_capture").warning("a library's warning, seen in the report")
    assert "a library's warning, seen in the report" in capsys.readouterr().err


def test_a_test_reading_caplog_without_the_capture_fails_saying_how_to_keep_it(request):
    if not request.config.pluginmanager.has_plugin("logging"):
        pytest.skip("-p no:logging: pytest's caplog does not exist in this run")
    if request.config.pluginmanager.get_plugin(log_capture.PLUGIN) is not None:
        caplog = request.getfixturevalue("caplog")  # (capture on: pytest's own, which records)
        logging.getLogger("fp8ref.tests.log_capture").warning("recorded")
        assert [r.getMessage() for r in caplog.records] == ["recorded"]
        return
    with pytest.raises(pytest.fail.Exception, match=r"reads caplog.*--log-level=NOTSET"):
        request.getfixturevalue("caplog")
