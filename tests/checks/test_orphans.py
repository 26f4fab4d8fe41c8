"""What a run's checks orphan is adopted and killed (gitaudit/checks/orphans.py): real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitaudit.checks import orphans
from gitaudit.checks.process import run_bounded

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


def _pid(path: Path) -> int:
    deadline = time.monotonic() + 10
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, "the daemon never wrote its pid"
        time.sleep(0.01)
    return int(path.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _escape(pidfile: Path) -> str:
    """A check that leaves a daemon in a session of its own and exits (once the daemon is in
    its session: before, it would die with the check's group)."""
    return (
        f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 30' "
        f"</dev/null >/dev/null 2>&1 & while ! test -s {pidfile}; do sleep 0.01; done"
    )


def test_a_setsid_daemon_of_a_check_is_adopted_and_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with orphans.adopting(set):
        result = run_bounded(["sh", "-c", _escape(pidfile)], cwd=tmp_path, timeout=30)
        assert result.exit_code == 0
        pid = _pid(pidfile)
        assert _alive(pid)  # it outlived its check, as the limit of process groups says
    assert not _alive(pid)  # killed and reaped: not even a zombie is left


def test_without_adoption_the_daemon_escapes(tmp_path: Path) -> None:
    """The control: a check run outside :func:`orphans.adopting` leaves its daemon behind."""
    pidfile = tmp_path / "pid"
    run_bounded(["sh", "-c", _escape(pidfile)], cwd=tmp_path, timeout=30)
    pid = _pid(pidfile)
    try:
        assert _alive(pid)
    finally:
        os.kill(pid, 9)


def test_what_the_killed_daemon_started_is_killed_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    grandchild = tmp_path / "grandchild"
    script = (
        f"setsid sh -c 'sh -c \"echo \\$\\$ > {grandchild}.tmp; mv {grandchild}.tmp {grandchild}; "
        f"exec sleep 30\" & echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait' "
        f"</dev/null >/dev/null 2>&1 & while ! test -s {grandchild}; do sleep 0.01; done"
    )
    with orphans.adopting(set):
        run_bounded(["sh", "-c", script], cwd=tmp_path, timeout=30)
        pids = _pid(pidfile), _pid(grandchild)
    assert not any(_alive(pid) for pid in pids)


def test_children_of_this_session_and_kept_pids_are_left_alone(tmp_path: Path) -> None:
    """gitaudit's own subprocesses (its session) and the checks still running (*keep*) are not
    adopted orphans."""
    ours = subprocess.Popen(["sleep", "30"])
    kept = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        with orphans.adopting(lambda: {kept.pid}):
            pass
        assert ours.poll() is None and kept.poll() is None
    finally:
        for proc in (ours, kept):
            proc.kill()
            proc.wait()


def test_a_chain_of_sessions_deeper_than_the_rounds_is_killed_whole(tmp_path: Path) -> None:
    """Each daemon of the chain is in a session of its own and started the next: a daemon's
    child is adopted only once its parent is killed, so one level a round was reached and the
    deepest outlived :data:`orphans.ROUNDS`. Each round now kills the whole subtree."""
    pidfile = tmp_path / "pid"
    chain = (
        "import os, sys, time\n"
        f"for _ in range({orphans.ROUNDS + 10}):\n"
        "    os.setsid()\n"
        "    if os.fork():\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "with open(sys.argv[1] + '.tmp', 'w') as f:\n"
        "    f.write(str(os.getpid()))\n"
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
        "time.sleep(30)\n"
    )
    script = (
        f'{sys.executable} -c "$CHAIN" {pidfile} </dev/null >/dev/null 2>&1 & '
        f"while ! test -s {pidfile}; do sleep 0.01; done"
    )
    with orphans.adopting(set):
        run_bounded(
            ["sh", "-c", script], cwd=tmp_path, timeout=30, env={**os.environ, "CHAIN": chain}
        )
        pid = _pid(pidfile)
        assert _alive(pid)
    try:
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.kill(pid, 9)
