"""`git audit push` against a real bare server: a lost race on the shared runs ref is retried."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Setup
from tests.gitrepo import audit, git


def other_machine(setup: Setup, path: Path) -> Path:
    git(path.parent, "clone", "-q", str(setup.server), str(path))
    git(path, "fetch", "-q", "origin", "refs/audit/*:refs/audit/*")
    git(path, "config", "audit.rootKey", setup.client.git("config", "audit.rootKey").strip())
    return path


def runs_on_server(setup: Setup) -> int:
    return int(git(setup.server, "rev-list", "--count", "refs/audit/runs/default").strip())


def test_a_lost_race_on_the_runs_ref_is_fetched_replayed_and_retried(
    setup: Setup, tmp_path: Path
) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    other = other_machine(setup, tmp_path / "other")
    assert audit(other, "run").code == 0  # another run, not yet pushed
    # the other machine pushes while this push is under way: between the server's ref
    # advertisement and our update (from a pre-push hook, which git runs just then)
    marker = tmp_path / "raced"
    legacy = setup.client.path / ".git" / "hooks" / "pre-push.legacy"
    legacy.write_text(
        "#!/bin/sh\n"
        f"[ -e '{marker}' ] && exit 0\n"
        f"touch '{marker}'\n"
        f"cd '{other}' && env -u GIT_DIR -u GIT_INDEX_FILE '{sys.executable}' -m gitaudit push "
        ">/dev/null 2>&1\n"
    )
    legacy.chmod(0o755)
    setup.client.write("more.txt", "more\n")
    setup.client.commit("more")
    assert audit(setup.client.path, "run").code == 0
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert marker.exists()
    assert "another push moved refs/audit/runs/default first" in pushed.stderr, pushed.stderr
    assert "refs/audit/runs/default: rebased 1" in pushed.stdout
    assert runs_on_server(setup) == 3  # ours, theirs, ours again: nothing lost
    assert audit(setup.server, "status", "main").code == 0


def test_a_refusal_that_is_not_a_race_is_not_retried(setup: Setup) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    setup.client.write("untested.txt", "no evidence\n")
    setup.client.commit("untested")
    # skip the client hook: the server's pre-receive hook refuses, which no retry can change
    proc = subprocess.run(
        [sys.executable, "-m", "gitaudit", "push"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        check=False,
        env={
            **setup.env(),
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": "/dev/null",
        },
    )
    assert proc.returncode == 1
    assert "another push moved" not in proc.stderr
    assert "pre-receive hook declined" in proc.stdout + proc.stderr
    assert runs_on_server(setup) == 1
