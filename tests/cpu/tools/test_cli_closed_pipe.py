"""``python -m fp8ref ... | head -1``: a reader that leaves early ends the command quietly with its
own exit code (``diff``: 1 when the profiles differ), nothing on stderr. Before, a write into the
closed pipe read as an error (``error: Broken pipe``, exit 2) and hid diff's 1; one left in the
buffer failed in the interpreter's last flush (exit 120 and a traceback-like note).

Each case runs ``python -m fp8ref`` as a process (a pipe is a process's stdout), under a small
Python stand-in for the shell's pipe: it reads one line and closes the pipe (``| head -1``), or
closes it before the command writes anything (no reader at all), and exits with the command's
code."""

import json
import subprocess

from tests.common.beside import fp8ref_cli, python_code
from tests.common.paths import GOLDEN

# ``| head -1``: read one line, print it, close the pipe, exit with the command's code
HEAD_1 = (
    "import subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
    "sys.stdout.buffer.write(p.stdout.readline()); p.stdout.close(); sys.exit(p.wait())"
)
# no reader at all: the pipe's read end is closed before the command starts
NO_READER = (
    "import os, subprocess, sys\n"
    "r, w = os.pipe(); os.close(r)\n"
    "sys.exit(subprocess.Popen(sys.argv[1:], stdout=w).wait())"
)


def run_beside(folder):
    golden = json.loads((GOLDEN / "cpu.json").read_text())
    one = json.loads(json.dumps(golden))
    one["behaviour"]["cast.e4m3fn.bf16.overflow"] = "something else"
    # every key differs, at 300 characters a value: far more text than a pipe holds (64 KiB on
    # Linux), so the command is still writing when the reader leaves
    every = json.loads(json.dumps(golden))
    every["behaviour"] = {k: "x" * 300 for k in golden["behaviour"]}
    paths = {name: folder / f"{name}.json" for name in ("golden", "one", "every")}
    for name, data in (("golden", golden), ("one", one), ("every", every)):
        paths[name].write_text(json.dumps(data))
    a, one_, every_ = str(paths["golden"]), str(paths["one"]), str(paths["every"])
    return {
        "diff | head -1": python_code(HEAD_1, *fp8ref_cli("diff", a, every_)),
        "diff --format markdown | head -1": python_code(HEAD_1, *fp8ref_cli("diff", a, every_, "--format", "markdown")),
        "diff, no reader": python_code(NO_READER, *fp8ref_cli("diff", a, one_)),
        "diff equal, no reader": python_code(NO_READER, *fp8ref_cli("diff", a, a)),
        "--help, no reader": python_code(NO_READER, *fp8ref_cli("--help")),
    }


def _quiet(done: subprocess.CompletedProcess, code: int, name: str) -> None:
    assert (done.returncode, done.stderr) == (code, ""), (
        f"{name}: expected exit {code} and nothing on stderr, got exit {done.returncode} and {done.stderr[-2000:]!r}"
    )


def test_diff_into_a_reader_that_leaves_after_a_line_keeps_exit_1(beside):
    for name in ("diff | head -1", "diff --format markdown | head -1"):
        done = beside(name)
        _quiet(done, 1, name)
        assert done.stdout.count("\n") == 1, f"{name}: expected the one line head read, got {done.stdout[:500]!r}"


def test_diff_without_a_reader_keeps_its_exit_code(beside):
    _quiet(beside("diff, no reader"), 1, "diff, no reader")
    _quiet(beside("diff equal, no reader"), 0, "diff equal, no reader")


def test_help_without_a_reader_exits_0(beside):
    _quiet(beside("--help, no reader"), 0, "--help, no reader")
