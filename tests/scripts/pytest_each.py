"""``pytest.main(argv)`` for each named run in turn, in this one interpreter (torch, fp8ref and the
plugins imported once, not once a run), or ``python -m fp8ref``'s ``main(argv)`` for a run with
``"fp8ref": true``; then one JSON line: each run's exit code and what it wrote to the file
descriptors 1 and 2 (as a process of its own would have: C code's output too).

Usage: python tests/scripts/pytest_each.py '{"name": {"argv": [...], "cwd": "FOLDER"}, ...}'
"""

import json
import os
import sys
import tempfile

import pytest

runs: dict[str, list] = {}
here = os.getcwd()
for name, run in json.loads(sys.argv[1]).items():
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            os.chdir(run.get("cwd", here))
            if run.get("fp8ref"):
                from fp8ref.__main__ import main

                code = int(main(run["argv"]))
            else:
                code = int(pytest.main(run["argv"]))
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            os.chdir(here)
        out.seek(0), err.seek(0)
        runs[name] = [code, out.read().decode(errors="replace"), err.read().decode(errors="replace")]
print(json.dumps(runs))
