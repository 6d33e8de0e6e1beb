"""The processes beside the tests (tests/plugins/beside.py, tests/common/beside.py): a queue that
runs them one at a time on one core, in order; a module's processes queued once, in a folder of
their own; several pytest runs in one interpreter, each read back as a process of its own."""

import json
import os
import subprocess
import sys
import time
import types

import pytest

from tests.common.beside import ProcessQueue, pytest_each, pytest_each_result, python_code
from tests.common.paths import GOLDEN, ROOT
from tests.plugins.beside import _KEY, _Beside


def test_the_queue_runs_its_processes_one_after_another_in_order(tmp_path):
    mark = tmp_path / "first"
    queue = ProcessQueue()
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
    queue = ProcessQueue()
    try:
        queue.submit("long", python_code("import time; time.sleep(600)"))
        queue.submit("quick", python_code("print('quick')"))
        start = time.monotonic()
        assert queue.result("quick", timeout=60).stdout.strip() == "quick"
        assert time.monotonic() - start < 60 and not queue.idle()  # "long" still runs
        assert queue.result("quick").stdout.strip() == "quick"  # the same result, not a second run
    finally:
        queue.close()


def test_a_process_runs_in_the_folder_and_environment_of_its_submission(tmp_path, monkeypatch):
    """A queued process may start while a test has moved into its own folder or set a variable
    (monkeypatch): it runs where and with what it was submitted, not what that test changed."""
    queue = ProcessQueue()
    try:
        queue.submit("long", python_code("import time; time.sleep(600)"))
        monkeypatch.setenv("FP8REF_QUEUE_PROBE", "at submission")
        queue.submit("where", python_code("import os; print(os.getcwd(), os.environ['FP8REF_QUEUE_PROBE'])"))
        submitted = os.getcwd()
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("FP8REF_QUEUE_PROBE", "a test's own")
        assert queue.result("where", timeout=60).stdout.split() == [submitted, "at", "submission"]
    finally:
        queue.close()


def test_a_process_that_cannot_start_fails_its_reader_and_the_queue_goes_on(tmp_path):
    queue = ProcessQueue()
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
    queue = ProcessQueue()
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


def test_a_module_starts_once_in_a_folder_of_its_own_and_a_broken_one_fails_its_readers(tmp_path_factory):
    calls = []

    def run_beside(folder):
        calls.append(folder)
        return {"where": python_code("import os; print(os.getcwd())"), "cwd": (python_code("pass"), {"cwd": folder})}

    good = types.ModuleType("tests.fake.test_good")
    good.run_beside = run_beside
    broken = types.ModuleType("tests.fake.test_broken")
    broken.run_beside = lambda folder: 1 / 0
    processes = _Beside(tmp_path_factory)
    try:
        processes.start(good.__name__, good)
        processes.start(good.__name__, good)  # queued once: a second start adds nothing
        assert processes.result(good.__name__, "cwd", good).returncode == 0
        assert processes.result(good.__name__, "where", good).returncode == 0
        assert len(calls) == 1 and calls[0].name.startswith("test_good") and calls[0].is_dir()
        raised = r"tests\.fake\.test_broken\.run_beside raised ZeroDivisionError"
        with pytest.raises(pytest.fail.Exception, match=raised):
            processes.result(broken.__name__, "anything", broken)
    finally:
        processes.close()


def test_the_tests_keep_one_thread_count_until_the_session_ends(tmp_path_factory):
    """The queue takes a core when it starts and gives it back when the session ends, not when it
    runs dry: inductor keys a compiled CPU graph on torch's thread count, so a count that changed
    at a moment that varies run to run made a warm run recompile (tests/plugins/beside.py)."""
    import torch

    good = types.ModuleType("tests.fake.test_threads")
    good.run_beside = lambda folder: {"quick": python_code("pass")}
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # (whatever the session's queue left: two, so that one less shows)
    processes = _Beside(tmp_path_factory)
    try:
        processes.start(good.__name__, good)
        assert torch.get_num_threads() == 1
        assert processes.result(good.__name__, "quick", good).returncode == 0 and processes.queue.idle()
        assert torch.get_num_threads() == 1, "the queue ran dry and the tests got their core back mid-run"
        processes.close()
        assert torch.get_num_threads() == 2
    finally:
        processes.close()
        torch.set_num_threads(before)


def test_this_run_keeps_the_thread_count_its_queue_set(request):
    """The run's own queue, wherever this test falls in the run: one thread less than before it
    started for as long as it has processes, ended or not (no hook gives the core back early)."""
    import torch

    processes = request.config.stash[_KEY]
    if processes._threads:
        assert torch.get_num_threads() == max(1, processes._threads - 1)
    else:
        assert not processes.queue._jobs, "the queue has had processes and the tests got its core back"


def test_pytest_each_reads_back_each_run_as_a_process_of_its_own(tmp_path):
    """Each run's exit code and what it wrote, C code's output too (written to the descriptors)."""
    (tmp_path / "test_one.py").write_text(
        "import os\ndef test_fails():\n    os.write(2, b'from fd 2 ')\n    assert False, 'on purpose'\n"
    )
    runs = {
        "fails": {"argv": ["test_one.py", "-p", "no:randomly", "-p", "no:cacheprovider", "-s"], "cwd": str(tmp_path)},
        "usage": {"argv": ["--no-such-option-fp8ref"], "cwd": str(tmp_path)},
    }
    done = subprocess.run(pytest_each(runs), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    fails, usage = pytest_each_result(done, "fails"), pytest_each_result(done, "usage")
    assert fails.args == runs["fails"]["argv"]
    assert fails.returncode == 1 and "on purpose" in fails.stdout and "1 failed" in fails.stdout, fails.stdout
    assert "from fd 2" in fails.stderr and "on purpose" not in fails.stderr
    assert usage.returncode == pytest.ExitCode.USAGE_ERROR and "--no-such-option-fp8ref" in usage.stderr
    assert sys.executable in done.args


def test_pytest_each_runs_a_script_as_its_own_process_would_and_puts_back_what_it_changed(tmp_path):
    """A script's exit code (SystemExit's, or 1 and the traceback on its stderr) and output; the
    runs after it share the interpreter, so its modules, sys.path and bytecode switch are put back,
    but for the checkout's modules: a script that imports them through the checkout on sys.path
    (a pytest run of a test of it does) leaves them, or a later run would import a second copy."""
    (tmp_path / "mine.py").write_text("")
    (tmp_path / "exits.py").write_text(
        "import sys\nsys.dont_write_bytecode = not sys.dont_write_bytecode\n"
        "sys.path.insert(0, sys.argv[1])\nimport mine\n"
        f"sys.path.insert(0, {str(ROOT)!r})\nimport tests.common.paths\n"
        "print('ran', sys.argv[1:])\nraise SystemExit(3)\n"
    )
    (tmp_path / "raises.py").write_text("raise ValueError('on purpose')\n")
    (tmp_path / "after.py").write_text(
        "import json, sys\n"
        "print(json.dumps(['mine' in sys.modules, sys.argv[1] in sys.path, sys.dont_write_bytecode,"
        " 'tests.common.paths' in sys.modules]))\n"
    )
    script = {"argv": [str(tmp_path)], "cwd": str(tmp_path)}
    runs = {name: {**script, "script": str(tmp_path / f"{name}.py")} for name in ("exits", "raises", "after")}
    done = subprocess.run(pytest_each(runs), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    exits, raises, after = (pytest_each_result(done, name) for name in runs)
    assert exits.returncode == 3 and exits.stdout == f"ran {[str(tmp_path)]}\n", (exits.stdout, exits.stderr)
    assert raises.returncode == 1 and "ValueError: on purpose" in raises.stderr, raises.stderr
    # (as it started; but the checkout's own modules are kept, one copy in the interpreter)
    assert json.loads(after.stdout) == [False, False, sys.dont_write_bytecode, True], after.stdout


def test_pytest_each_refuses_runs_that_want_different_environments_naming_both(tmp_path):
    runs = {
        "a": {"argv": ["--version"], "env": {"FP8REF_X": "1"}},
        "b": {"argv": ["--version"], "env": {"FP8REF_X": "2"}},
    }
    done = subprocess.run(pytest_each(runs), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1 and "env: run 'b' wants FP8REF_X='2', run 'a' FP8REF_X='1'" in done.stderr, done.stderr


_GOLDEN = str(GOLDEN / "cpu.json")


def test_the_pytest_each_runs_of_several_modules_share_one_interpreter(tmp_path_factory):
    """Two modules' pytest_each jobs run as one process (each interpreter costs seconds of
    imports), its python -m fp8ref runs first, and each module reads back only its own runs."""
    one = types.ModuleType("tests.fake.test_one")
    one.run_beside = lambda folder: {"runs": pytest_each({"help": {"argv": ["--version"]}})}
    two = types.ModuleType("tests.fake.test_two")
    two.run_beside = lambda folder: {"runs": pytest_each({"cli": {"argv": ["diff", _GOLDEN, _GOLDEN], "fp8ref": True}})}
    processes = _Beside(tmp_path_factory)
    try:
        processes.start_all([(one.__name__, one), (two.__name__, two)])
        assert len(processes.queue._jobs) == 1, processes.queue._jobs  # one process for both
        (argv,) = [a for a, _ in processes.queue._jobs.values()]
        assert list(json.loads(argv[-1])) == ["tests.fake.test_two:runs|cli", "tests.fake.test_one:runs|help"]
        mine = processes.result(one.__name__, "runs", one)
        assert json.loads(mine.stdout).keys() == {"help"} and pytest_each_result(mine, "help").returncode == 0
        cli = pytest_each_result(processes.result(two.__name__, "runs", two), "cli")
        assert cli.returncode == 0 and "equal:" in cli.stdout, cli
    finally:
        processes.close()
