"""The processes beside the tests (tests/plugins/beside.py, tests/common/beside.py): in a
one-process run they go one after another, in order, on one core."""

import os
import time

import pytest

from tests.common.beside import OneAfterAnother, python_code


def test_the_queue_runs_its_processes_one_after_another_in_order(tmp_path):
    mark = tmp_path / "first"
    queue = OneAfterAnother()
    try:
        queue.submit(
            "first", python_code("import sys, time; time.sleep(0.3); open(sys.argv[1], 'w').write('done')", str(mark))
        )
        queue.submit("second", python_code("import sys; print(open(sys.argv[1]).read()); sys.exit(3)", str(mark)))
        assert "second" in queue and "third" not in queue
        while not queue.idle():  # nobody asks: the queue runs both, the second after the first
            time.sleep(0.01)
        second = queue.result("second", timeout=60)
        assert (second.returncode, second.stdout.strip()) == (3, "done")
        assert queue.result("first").returncode == 0 and queue.idle()
        with pytest.raises(ValueError, match="'first' was submitted already"):
            queue.submit("first", python_code("pass"))
    finally:
        queue.close()


def test_a_reader_runs_a_process_that_has_not_started_instead_of_waiting(tmp_path):
    """While the queue runs a long first process, asking for a later one runs it at once on the
    asking thread (the core that would wait for it), and the queue does not run it again."""
    queue = OneAfterAnother()
    try:
        queue.submit("long", python_code("import time; time.sleep(600)"))
        queue.submit("quick", python_code("print('quick')"))
        start = time.monotonic()
        assert queue.result("quick", timeout=60).stdout.strip() == "quick"
        assert time.monotonic() - start < 60 and not queue.idle()  # "long" still runs
        assert queue.result("quick").stdout.strip() == "quick"  # the same result, not a second run
    finally:
        queue.close()


def test_a_process_that_cannot_start_fails_its_reader_and_the_queue_goes_on(tmp_path):
    queue = OneAfterAnother()
    try:
        queue.submit("nowhere", python_code("pass"), cwd=tmp_path / "no such folder")
        queue.submit("after", python_code("print('ran')"))
        with pytest.raises(RuntimeError, match="nowhere: could not be started"):
            queue.result("nowhere", timeout=60)
        assert queue.result("after", timeout=60).stdout.strip() == "ran"
    finally:
        queue.close()


def test_closing_the_queue_stops_the_running_process(tmp_path):
    pid_file = tmp_path / "pid"
    queue = OneAfterAnother()
    queue.submit(
        "sleeper",
        python_code(
            "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)", str(pid_file)
        ),
    )
    queue.submit("never", python_code("pass"))
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the queue's process never started"
        time.sleep(0.01)
    queue.close()
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)
    assert not queue.idle()  # the queue was dropped, not run
    with pytest.raises(TimeoutError, match="never"):
        queue.result("never", timeout=0.01)
