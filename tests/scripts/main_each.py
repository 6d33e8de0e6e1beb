"""``fp8ref.__main__.main(argv)`` for each named argv in turn, in this one fresh interpreter; then
one JSON line: each call's exit code (a SystemExit's too, as from --help), its stderr and the
levels of the loggers the CLI quiets right after it, and the modules the process imported.

Usage: python tests/scripts/main_each.py '{"name": ["formats", "--json"], ...}'
"""

import contextlib
import io
import json
import logging
import sys

from fp8ref.__main__ import _IMPORT_NOISE, main

calls: dict[str, list] = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code: object
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    calls[name] = [code, err.getvalue(), [logging.getLogger(n).level for n in _IMPORT_NOISE]]
print(json.dumps({"calls": calls, "modules": sorted(sys.modules)}))
