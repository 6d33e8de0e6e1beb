#!/usr/bin/env python3
"""Run the default tier (``pytest -m cpu``) with its cost account (``--fp8-durations``) and write
the account into docs/timings.md between its markers, with when, the load average and the
versions, so the table there is the account's output, never typed by hand.

    python scripts/timings.py [--docs docs/timings.md] [--note TEXT] [-- PYTEST_ARGS...]

Run it from the checkout with the interpreter of the venv to measure (its torch is the one the
table names); PYTEST_ARGS replace ``-p no:randomly`` (e.g. ``-p no:randomly --cache-clear`` for a
first run). Exit: pytest's exit code (the docs are rewritten only when it is 0), 2 for bad
arguments or missing markers. Standard library only here; the account is the plugin's."""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- cost-account:start (scripts/timings.py writes what lies between these markers) -->"
END = "<!-- cost-account:end -->"


def splice(doc: str, table: str, header: str) -> str:
    """``doc`` with what lies between ``START`` and ``END`` replaced by ``header`` and ``table``;
    ValueError naming the markers when either is missing or out of order."""
    head, start, rest = doc.partition(START)
    middle, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"docs/timings.md: no {START!r} ... {END!r} pair of markers to write the table between")
    del middle
    return f"{head}{START}\n{header}\n\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    cut = args_in.index("--") if "--" in args_in else len(args_in)
    ours, pytest_args = args_in[:cut], args_in[cut + 1 :] or ["-p", "no:randomly"]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "timings.md", help="the file to write into")
    ap.add_argument("--note", default="", help="a sentence on the conditions (which tree, first run or warm)")
    args = ap.parse_args(ours)
    if not args.docs.is_file():
        print(f"--docs: {args.docs} is not a file", file=sys.stderr)
        return 2
    try:
        splice(args.docs.read_text(), "", "")  # (the markers, checked before a run of minutes)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "cost.md"
        command = [sys.executable, "-m", "pytest", "-m", "cpu", "-q", *pytest_args, f"--fp8-durations-md={table}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        load = os.getloadavg()
        started = time.monotonic()
        code = subprocess.run(command, cwd=ROOT, env=env).returncode
        wall = time.monotonic() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        if code != 0 or not table.is_file():
            print(f"pytest exited {code}: {args.docs} left as it was", file=sys.stderr)
            return code or 1
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        header = (
            f"Written by `python scripts/timings.py` on {when}: `{' '.join(['pytest', *command[3:-1]])}`, "
            f"{wall:.1f} s wall and {usage.ru_utime + usage.ru_stime:.1f} s CPU for the whole command (interpreter "
            f"start and exit included), load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
            "(1, 5, 15 minutes) before it." + (f" {args.note}" if args.note else "")
        )
        args.docs.write_text(splice(args.docs.read_text(), table.read_text(), header))
    print(f"{args.docs}: the cost account written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
