"""Ctrl-C during `git audit run`, with real SIGINTs sent to a real process: one story.

The first SIGINT while checks run stops them and records the run as INTERRUPTED; later SIGINTs
only print (the record is still written: no traceback, no half-written cache); a SIGINT before
any check ran records nothing and says so. Steps wait on files the test controls (never on time).
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

from gitaudit.run import interrupts
from tests.gitrepo import GitRepo, audit

pytestmark = pytest.mark.usefixtures("sigint_delivered")  # the suite may run with it ignored


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


def test_one_ctrl_c_while_checks_run_records_an_interrupted_run(
    repo: GitRepo, tmp_path: Path
) -> None:
    flag = tmp_path / "started"
    _plan(repo, flag)
    proc = _start(repo)
    _wait_for(flag, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "default: INTERRUPTED" in out
    assert "! slow interrupted" in err
    (row,) = _runs(repo)
    assert row["verdict"] == "INTERRUPTED"


def test_a_double_ctrl_c_still_records_the_run_and_says_so(repo: GitRepo, tmp_path: Path) -> None:
    flag = tmp_path / "started"
    _plan(repo, flag)
    proc = _start(repo)
    _wait_for(flag, proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "Traceback" not in err and "rollback" not in err
    assert "nothing was recorded" not in err
    assert "default: INTERRUPTED" in out
    (row,) = _runs(repo)
    assert row["verdict"] == "INTERRUPTED"
    # the lookup cache agrees with the ledger
    assert audit(repo.path, "verify").code == 0


def test_ctrl_c_before_any_check_records_nothing_and_says_so(repo: GitRepo, tmp_path: Path) -> None:
    _plan(repo, tmp_path / "never")
    # a `git` first on PATH that parks the run in its first git call (the fingerprint, before
    # any check) until the test has sent its SIGINT
    shims = tmp_path / "shims"
    shims.mkdir()
    parked = tmp_path / "parked"
    real = shutil.which("git")
    (shims / "git").write_text(
        f"#!/bin/sh\nif [ ! -e {parked} ]; then touch {parked}; exec sleep 600; fi\n"
        f'exec {real} "$@"\n'
    )
    (shims / "git").chmod(0o755)
    proc = _start(repo, {"PATH": f"{shims}:{os.environ['PATH']}"})
    _wait_for(parked, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted (Ctrl-C)" in err and "nothing" in err
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
