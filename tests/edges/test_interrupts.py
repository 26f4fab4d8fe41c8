"""Ctrl-C during `git audit run`, with real SIGINTs sent to a real process: one story.

The first SIGINT while checks run stops them and records the run as INTERRUPTED; later SIGINTs
only print (the record is still written: no traceback, no half-written cache); a SIGINT before
any check ran records nothing and says so. SIGTERM (a cancelled CI job, `timeout`, `kill`) and
SIGHUP (a closed terminal) tell the same story. Steps wait on files the test controls (never on
time).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitaudit.git.repo import open_repo
from gitaudit.ledger.runs import read_run
from gitaudit.run import interrupts
from tests.gitrepo import GitRepo, audit

# the suite may run with SIGINT (or SIGHUP) ignored
pytestmark = pytest.mark.usefixtures("stops_delivered")

NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
"""How a run names each signal that stops it, in its messages and its record."""


def _plan(repo: GitRepo, flag: Path) -> None:
    repo.write_plan(
        {
            "task": "t",
            "requirements": [{"id": "R", "description": "r"}],
            "steps": [
                {
                    "id": "slow",
                    "title": "A slow step",
                    "covers": ["R"],
                    "verify": [
                        {
                            "type": "run",
                            "argv": ["sh", "-c", f"touch {flag}; sleep 600"],
                            "timeout": 900,
                        }
                    ],
                }
            ],
        }
    )
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        assert audit(repo.path, *args).code == 0


def _start(repo: GitRepo, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gitaudit", "run"],
        cwd=repo.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GITAUDIT_PROGRESS_SECONDS": "0", **(env or {})},
    )


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)


def _runs(repo: GitRepo) -> list[dict[str, object]]:
    out = audit(repo.path, "log", "--json")
    assert out.code == 0, out.err
    rows: list[dict[str, object]] = out.json()
    return rows


# id: (the signal, how many times it is sent while the checks run): the first stops the run,
# the later ones only print
WHILE_CHECKS_RUN = {
    "one-SIGINT": (signal.SIGINT, 1),
    "three-SIGINTs": (signal.SIGINT, 3),
    "two-SIGTERMs": (signal.SIGTERM, 2),
    "two-SIGHUPs": (signal.SIGHUP, 2),
}


@pytest.mark.parametrize("case", list(WHILE_CHECKS_RUN))
def test_a_ctrl_c_sigterm_or_sighup_while_checks_run_records_an_interrupted_run(
    repo: GitRepo, tmp_path: Path, case: str
) -> None:
    """Left to its default action, a SIGTERM or SIGHUP ended the process with nothing written:
    no failed attempt counted, no unknown outcome to reconcile. Now each is recorded as Ctrl-C
    is (exit 3, the step interrupted by the signal's name), and a second or third signal only
    prints: the record is still written whole (no traceback, no rollback, and the lookup cache
    agrees with the ledger)."""
    stop, times = WHILE_CHECKS_RUN[case]
    flag = tmp_path / "started"
    _plan(repo, flag)
    proc = _start(repo)
    _wait_for(flag, proc)
    for _ in range(times):
        proc.send_signal(stop)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "rollback" not in err and "nothing was recorded" not in err
    assert "default: INTERRUPTED" in out
    assert "! slow interrupted" in err
    (row,) = _runs(repo)
    assert row["verdict"] == "INTERRUPTED"
    entry = read_run(open_repo(repo.path).git, str(row["commit"])).steps["slow"]
    assert (entry.status, entry.reason) == ("interrupted", f"interrupted by {NAMES[stop]}")
    assert audit(repo.path, "verify").code == 0


def _parked(repo: GitRepo, tmp_path: Path, where: str = "") -> tuple[subprocess.Popen[str], Path]:
    """A run parked in its first git call (the fingerprint, before any check) by a `git` first
    on PATH, until the test has sent its signal; and the file that says it is parked. With
    *where* (a shell pattern), in the first git call whose arguments match it instead, which
    goes on once the test creates the file ``release`` beside ``parked``."""
    shims = tmp_path / "shims"
    shims.mkdir()
    parked = tmp_path / "parked"
    release = tmp_path / "release"
    real = shutil.which("git")
    park = (
        f'case "$*" in {where}) if [ ! -e {parked} ]; then touch {parked}; '
        f"while [ ! -e {release} ]; do sleep 0.01; done; fi;; esac"
        if where
        else f"if [ ! -e {parked} ]; then touch {parked}; exec sleep 600; fi"
    )
    (shims / "git").write_text(f'#!/bin/sh\n{park}\nexec {real} "$@"\n')
    (shims / "git").chmod(0o755)
    return _start(repo, {"PATH": f"{shims}:{os.environ['PATH']}"}), parked


# id: (the signal, where the run is parked when it arrives: in its first git call, the
# fingerprint, or where its checkout is written, inside the command's session (a signal that
# ends the process before the session, as its default action does, leaves nothing behind
# either))
BEFORE_ANY_CHECK = {
    "SIGINT": (signal.SIGINT, ""),
    "SIGTERM": (signal.SIGTERM, "*read-tree*"),
    "SIGHUP": (signal.SIGHUP, "*read-tree*"),
}


@pytest.mark.parametrize("case", list(BEFORE_ANY_CHECK))
def test_a_ctrl_c_sigterm_or_sighup_before_any_check_records_nothing_and_says_so(
    repo: GitRepo, tmp_path: Path, case: str
) -> None:
    """Named as it is (Ctrl-C for SIGINT), with 128 + its number as the exit status, as a shell
    reports it (130 for Ctrl-C)."""
    stop, where = BEFORE_ANY_CHECK[case]
    _plan(repo, tmp_path / "never")
    proc, parked = _parked(repo, tmp_path, where)
    _wait_for(parked, proc)
    proc.send_signal(stop)
    (tmp_path / "release").touch()  # a checkout's git goes on: the signal was delivered
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + stop, out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert f"interrupted ({NAMES[stop]})" in err and "nothing" in err
    assert _runs(repo) == []


def test_a_ctrl_c_while_the_record_is_written_waits_for_it() -> None:
    with interrupts.session():
        interrupts.hold()
        with interrupts.held():
            os.kill(os.getpid(), signal.SIGINT)  # absorbed: the record is being written
            assert interrupts.requested()
    assert not interrupts.requested()  # the session is over


def test_the_run_stops_after_an_interrupted_plan(repo: GitRepo, tmp_path: Path) -> None:
    flag = tmp_path / "started"
    _plan(repo, flag)
    second = json.loads((repo.path / ".gitaudit/plans/default.json").read_text())
    second["steps"][0]["verify"][0]["argv"] = ["true"]
    repo.write_plan(second, "zz-second")
    repo.commit("second plan")
    assert audit(repo.path, "plan", "seal").code == 0
    proc = _start(repo)
    _wait_for(flag, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "interrupted: not started: zz-second" in err
    assert audit(repo.path, "log", "--plan", "zz-second", "--json").json() == []
