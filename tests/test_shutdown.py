"""``gitaudit.shutdown.leave``: a command's process ends without the interpreter's teardown, yet
runs its exit handlers, says everything it printed, and never cuts a running thread short."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_leave_runs_the_exit_handlers_and_flushes_the_output(tmp_path: Path) -> None:
    code = (
        "import atexit, sys\n"
        "from gitaudit.shutdown import leave\n"
        "atexit.register(lambda: open('handled', 'w').write('yes'))\n"
        "sys.stdout.write('no newline, still buffered')\n"
        "sys.stderr.write('and on stderr')\n"
        "leave(3)\n"
        "print('never')\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 3
    assert done.stdout == "no newline, still buffered"
    assert done.stderr == "and on stderr"
    assert (tmp_path / "handled").read_text() == "yes"


def test_leave_waits_for_a_running_thread(tmp_path: Path) -> None:
    """A non-daemon thread still working: the normal exit, which waits for it."""
    code = (
        "import threading, time\n"
        "from gitaudit.shutdown import leave\n"
        "def work():\n"
        "    time.sleep(0.3)\n"
        "    open('finished', 'w').write('yes')\n"
        "threading.Thread(target=work).start()\n"
        "leave(0)\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "finished").read_text() == "yes"


def test_leave_imports_no_threading_where_none_was_started(tmp_path: Path) -> None:
    """No thread without the threading module: leave does not import it to look (the hooks'
    fast path does without it), and still ends at once, its handlers run."""
    code = (
        "import atexit, sys\n"
        "from gitaudit.shutdown import leave\n"
        "atexit.register(lambda: print('threading' in sys.modules))\n"
        "leave(4)\n"
    )
    done = _python(code, tmp_path)
    assert (done.returncode, done.stdout) == (4, "False\n"), done.stderr


def test_leave_into_a_closed_pipe_keeps_its_exit_code(tmp_path: Path) -> None:
    """stdout closed by the reader before the flush: no traceback, the command's own code."""
    code = (
        "import os, sys\n"
        "from gitaudit.shutdown import leave\n"
        "sys.stdout.write('x' * 100)\n"
        "os.close(1)\n"
        "leave(1)\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr


def test_leave_lets_a_profiler_write_its_findings(tmp_path: Path) -> None:
    """Under ``python -m cProfile`` the statistics are written after the program ends: the
    normal exit (which cProfile turns into 0, as for any program)."""
    script = tmp_path / "command.py"
    script.write_text("from gitaudit.shutdown import leave\nleave(3)\n")
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(tmp_path / "stats"), str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "stats").stat().st_size > 0
