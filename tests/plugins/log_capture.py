"""pytest's log capture, off in this suite unless a logging option asks for it.

Around each test's setup, call and teardown, pytest's logging plugin adds two handlers to the root
logger and to every logger that does not propagate, and removes them after: with torch,
transformers and datasets loaded that is some 60 loggers walked and locked six times a phase, 3-4%
of the default tier's time (docs/timings.md). No test of this suite reads ``caplog``, and a
library's warning still reaches a failed test's report as captured stderr (Python's last-resort
handler writes it there when nothing else handles it).

Any logging option given (``--log-level``, ``--log-cli-level``, ``--log-file``, ``-o log_cli=true``
and their ini settings) keeps pytest's capture as it is. (``-p no:logging`` would also drop the
options themselves, and pytest cannot take it back with ``-p logging`` on the command line.)
"""

from __future__ import annotations

import pytest

PLUGIN = "logging-plugin"  # the name _pytest/logging.py registers its LoggingPlugin under
_OPTIONS = ("log_level", "log_cli_level", "log_file", "log_file_level")  # as options and ini settings


def wanted(config: pytest.Config) -> bool:
    """True when the command line or the ini file asks for any of pytest's logging."""
    if any(config.getoption(name, default=None) for name in _OPTIONS):
        return True
    if any(config.getini(name) for name in _OPTIONS):
        return True
    return bool(config.getini("log_cli"))


def pytest_configure(config: pytest.Config) -> None:
    # before _pytest.logging's own pytest_configure (trylast), which registers the plugin: a
    # blocked name is not registered, and the hooks that add and remove the handlers never run
    if not wanted(config):
        config.pluginmanager.set_blocked(PLUGIN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.pluginmanager.get_plugin(PLUGIN) is not None:
        return
    for item in items:
        if "caplog" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(
                f"{item.nodeid} reads caplog, but this suite turns pytest's log capture off "
                "(tests/plugins/log_capture.py): give a logging option (--log-level=NOTSET) to keep it"
            )
