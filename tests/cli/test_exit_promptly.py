"""``edct`` exits without the interpreter's module teardown when nothing is left running, and owes
nothing it would have done; with a child process or a thread still running it exits as usual."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.hang_guard import hang_limit

BIN = Path(sys.executable).parent

PROGRAM = textwrap.dedent(
    """
    import atexit, multiprocessing, sys, tempfile, threading, time
    from edct_task.core.exit import exit_promptly

    class Teardown:  # its __del__ runs only in the interpreter's module teardown
        def __del__(self):
            print("teardown", flush=True)

    if __name__ == "__main__":  # (the spawned child imports this file too)
        keep = Teardown()
        folder = tempfile.TemporaryDirectory(dir=sys.argv[1])  # removed by its atexit finalizer
        open(sys.argv[1] + "/folder", "w").write(folder.name)
        atexit.register(lambda: print("atexit ran", flush=True))
        if sys.argv[2] == "thread":
            threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", flush=True))).start()
        if sys.argv[2] == "child":
            multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0.3,)).start()
        print("buffered,", end="")  # no newline: still in the buffer when exit starts
        print("to stderr", end="", file=sys.stderr)
        exit_promptly(3)
    """
)


pytestmark = pytest.mark.slow  # the edct command in subprocesses: make test, not make test-fast


def _run(tmp_path: Path, case: str) -> subprocess.CompletedProcess:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path), case],
        capture_output=True,
        text=True,
        timeout=hang_limit(60),
    )


def test_with_nothing_running_it_skips_the_teardown_and_keeps_everything_else(tmp_path):
    proc = _run(tmp_path, "alone")
    assert proc.returncode == 3
    assert proc.stdout == "buffered,atexit ran\n"  # no "teardown": modules were not freed
    assert proc.stderr == "to stderr"
    assert not Path((tmp_path / "folder").read_text()).exists()


@pytest.mark.parametrize("case", ["thread", "child"])
def test_with_a_thread_or_a_child_process_running_it_exits_as_usual(tmp_path, case):
    proc = _run(tmp_path, case)
    assert proc.returncode == 3
    assert proc.stdout.startswith("buffered,")
    assert "atexit ran" in proc.stdout and "teardown" in proc.stdout  # the interpreter's own exit
    assert ("thread done" in proc.stdout) == (case == "thread")
    assert not Path((tmp_path / "folder").read_text()).exists()


def test_the_edct_command_exits_through_it_with_mains_code(tmp_path):
    proc = subprocess.run(
        [str(BIN / "edct"), "run", "--model", "edct_reference", "--tasks", "no_such_task"],
        capture_output=True,
        text=True,
        timeout=hang_limit(300),
        cwd=tmp_path,
        env={
            "PATH": str(BIN),
            "HOME": str(tmp_path),
            "HF_HUB_OFFLINE": "1",
            "EDCT_WORK_DIR": str(tmp_path / "w"),
        },
    )
    assert proc.returncode == 2
    assert "unknown task(s) no_such_task" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "from edct_task.cli.main import console" in (BIN / "edct").read_text()
