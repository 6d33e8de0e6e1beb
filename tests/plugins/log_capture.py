"""pytest's log capture, off in this suite unless a logging option asks for it.

Around each test's setup, call and teardown, pytest's logging plugin adds two handlers to the root
logger and to every logger that does not propagate, and removes them after: with torch,
transformers and datasets loaded that is some 60 loggers walked and locked six times a phase, 3-4%
of the default tier's time (docs/timings.md). No test of this suite reads ``caplog``, and a
library's warning that no handler of its own takes still reaches a failed test's report, as
captured stderr (Python's last-resort handler writes it to the ``sys.stderr`` of the moment).

Any of pytest's logging options or ini settings given (``--log-level``, ``--log-cli-level``,
``--log-file``, ``-o log_cli=true``, ``--log-format``, ...) keeps pytest's capture as it is. A test
that asks for ``caplog`` while it is off fails saying so. (``-p no:logging`` drops the options
themselves, and pytest cannot take it back with ``-p logging`` on the command line; blocked this
way, the plugin's object is still built, and its unused handler keeps ``os.devnull`` open until
the process ends.)
"""

from __future__ import annotations

import pytest
from _pytest.logging import DEFAULT_LOG_DATE_FORMAT, DEFAULT_LOG_FORMAT  # (what an unset setting reads as)

PLUGIN = "logging-plugin"  # the name _pytest/logging.py registers its LoggingPlugin under

# pytest's logging group (_pytest/logging.py's pytest_addoption, pytest 8 and 9): each ini setting
# with the value it reads as when nobody set it (each also a command-line option, None unless given),
# and the one option without an ini setting (--log-disable, [] unless given).
# tests/cpu/tools/test_plugin_log_capture.py holds this list to pytest's own.
INI_DEFAULTS: dict[str, object] = {
    "log_level": None,
    "log_format": DEFAULT_LOG_FORMAT,
    "log_date_format": DEFAULT_LOG_DATE_FORMAT,
    "log_cli": False,
    "log_cli_level": None,
    "log_cli_format": None,
    "log_cli_date_format": None,
    "log_file": None,
    "log_file_mode": "w",
    "log_file_level": None,
    "log_file_format": None,
    "log_file_date_format": None,
    "log_auto_indent": None,
}
OPTION_ONLY = ("logger_disable",)


def _set(value: object, default: object) -> bool:
    """A setting's value other than its unset one (0 is a level, NOTSET: set; an unset string
    setting reads as "" on some pytest versions, an unset --log-disable as [])."""
    if value is None or value == default:
        return False
    return not (isinstance(value, (str, list)) and not value)


def wanted(config: pytest.Config) -> bool:
    """True when the command line or the ini file sets any of pytest's logging options (False
    under -p no:logging, where they do not exist)."""
    if not config.pluginmanager.has_plugin("logging"):
        return False
    options = [*(n for n in INI_DEFAULTS if n != "log_cli"), *OPTION_ONLY]
    if any(_set(config.getoption(name, default=None), None) for name in options):
        return True
    return any(_set(config.getini(name), default) for name, default in INI_DEFAULTS.items())


def pytest_configure(config: pytest.Config) -> None:
    # before _pytest.logging's own pytest_configure (trylast), which registers the plugin: a
    # blocked name is not registered, and the hooks that add and remove the handlers never run
    if config.pluginmanager.has_plugin("logging") and not wanted(config):  # (-p no:logging: nothing to block)
        config.pluginmanager.set_blocked(PLUGIN)


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest) -> pytest.LogCaptureFixture:
    """pytest's ``caplog`` (this fixture's namesake) where its log capture is on; where this suite
    turned it off, a failure saying how to keep it (here, not as a KeyError at the first record)."""
    if request.config.pluginmanager.get_plugin(PLUGIN) is None:
        pytest.fail(
            f"{request.node.nodeid} reads caplog, but this suite turns pytest's log capture off "
            "(tests/plugins/log_capture.py): give a logging option (--log-level=NOTSET) to keep it",
            pytrace=False,
        )
    return caplog
