"""Runs of a plan with steps that are not idempotent are kept apart (recorder._one_at_a_time):
an exclusive flock from before the ledger is read until the run is recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitaudit.errors import RunError
from gitaudit.git.repo import open_repo
from gitaudit.plan.model import Plan
from gitaudit.run.recorder import _one_at_a_time
from tests.gitrepo import GitRepo


def _plan(idempotent: bool) -> Plan:
    step = type("S", (), {"id": "deploy", "idempotent": idempotent})()
    return type("P", (), {"name": "default", "steps": [step]})()  # type: ignore[no-any-return]


def test_a_second_holder_is_refused_and_the_lock_is_taken_again_once_released(
    repo: GitRepo,
) -> None:
    handle = open_repo(repo.path)
    with _one_at_a_time(handle, _plan(False)):
        with pytest.raises(RunError) as refused, _one_at_a_time(handle, _plan(False)):
            pass
        assert "deploy" in refused.value.message and ".flock" in refused.value.message
    with _one_at_a_time(handle, _plan(False)):
        pass


def test_idempotent_plans_take_no_lock(repo: GitRepo) -> None:
    handle = open_repo(repo.path)
    with _one_at_a_time(handle, _plan(True)), _one_at_a_time(handle, _plan(True)):
        pass
    assert not list(Path(handle.gitdir).rglob("*.flock"))


def test_a_killed_holder_leaves_nothing_held(repo: GitRepo) -> None:
    """SIGKILL of a run holding the lock: the kernel releases it, no hand repair."""
    code = (
        "import sys, time\n"
        "from gitaudit.git.repo import open_repo\n"
        "from gitaudit.run.recorder import _one_at_a_time\n"
        "from tests.run.test_one_at_a_time import _plan\n"
        "with _one_at_a_time(open_repo(sys.argv[1]), _plan(False)):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(repo.path)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    handle = open_repo(repo.path)
    with pytest.raises(RunError), _one_at_a_time(handle, _plan(False)):
        pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    time.sleep(0.05)
    with _one_at_a_time(handle, _plan(False)):
        pass


def test_a_fifo_or_a_link_in_its_place_does_not_hang_or_follow(
    repo: GitRepo, tmp_path: Path
) -> None:
    handle = open_repo(repo.path)
    lock = Path(handle.gitdir) / "gitaudit" / "not-idempotent-default.flock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(lock)
    with _one_at_a_time(handle, _plan(False)):  # opened read-write, non-blocking
        pass
    lock.unlink()
    target = tmp_path / "elsewhere"
    lock.symlink_to(target)
    with pytest.raises(RunError) as refused, _one_at_a_time(handle, _plan(False)):
        pass
    assert refused.value.hint is not None and str(lock) in refused.value.hint
    assert not target.exists()


def test_the_lock_file_in_git_deleted_while_held_still_keeps_runs_apart(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `.git/` lock is the agent's to delete or rename while a run holds it (the next run
    would lock a new file): the gitaudit home's lock and, on Linux, the socket name still
    refuse the second, also under another GITAUDIT_HOME."""
    handle = open_repo(repo.path)
    lock = Path(handle.gitdir) / "gitaudit" / "not-idempotent-default.flock"
    with _one_at_a_time(handle, _plan(False)):
        lock.unlink()
        with pytest.raises(RunError) as refused, _one_at_a_time(handle, _plan(False)):
            pass
        assert "under way" in refused.value.message
        if sys.platform.startswith("linux"):
            lock.unlink(missing_ok=True)
            monkeypatch.setenv("GITAUDIT_HOME", str(tmp_path / "another-home"))
            with pytest.raises(RunError) as refused, _one_at_a_time(handle, _plan(False)):
                pass
            assert "under way" in refused.value.message
    with _one_at_a_time(handle, _plan(False)):  # all released
        pass


def test_the_home_lock_is_keyed_by_repository_and_plan(repo: GitRepo, tmp_path: Path) -> None:
    from gitaudit.places import run_lock_path

    handle = open_repo(repo.path)
    here = run_lock_path(handle.gitdir, "default")
    assert here != run_lock_path(handle.gitdir, "other")
    assert os.path.dirname(here).endswith("locks") and here.endswith(".flock")
