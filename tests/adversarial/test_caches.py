"""Attacks on the caches the gate trusts: the verdict memo, the schema-valid marks, the
fingerprint's kept index and the ledger's lookup cache (class "caches").

Each cache is state the agent can write or influence; a cache may only ever answer what the full
judgement would answer in the same state, so each attack changes what the full gate reads and
leaves the cache's key as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.host import run_hook, stop
from tests.gitrepo import GitRepo, audit

IGNORED_PLAN = {
    "task": "the greeting reads its tool's verdict",
    "requirements": [{"id": "R", "description": "the tool says ok", "priority": "must"}],
    "ignored_paths": ["tools"],
    "steps": [
        {
            "id": "unit",
            "depends_on": [],
            "covers": ["R"],
            "verify": [{"type": "run", "argv": ["grep", "-qx", "ok", "tools/verdict"]}],
        }
    ],
}


CHANGED = "the declared ignored path 'tools' changed since the run that proved plan 'default'"


def _ignored_project(path: Path) -> GitRepo:
    repo = GitRepo.create(path)
    repo.write(".gitignore", "tools/\n")
    repo.write("tools/verdict", "ok\n")
    repo.write("app.py", "x = 1\n")
    repo.commit("app")
    done = audit(repo.path, "init")
    assert done.code == 0, done.out + done.err
    repo.write_plan(IGNORED_PLAN)
    done = audit(repo.path, "plan", "seal", "--reason", "first version")
    assert done.code == 0, done.out + done.err
    repo.git("add", "-A")
    repo.git("commit", "-q", "--no-verify", "-m", "plan")
    return repo


@pytest.mark.parametrize("remembered_by", ["run", "status", "push-judgement"])
def test_attack_caches_memo_serves_the_stop_hook_a_pass_relying_on_ignored_paths(
    tmp_path: Path, remembered_by: str
) -> None:
    """The run that proved the tree read the declared ignored path tools/verdict; a PASS is
    remembered (by the run itself, by `status`, or judged for a push of HEAD). The agent then
    changes tools/verdict, which the tree and the memo's state do not cover, and stops: the
    stop hook took the remembered PASS (all three allowed the stop before the fix); the full
    gate says UNKNOWN, and so does the hook now."""
    repo = _ignored_project(tmp_path / "project")
    ran = audit(repo.path, "run")
    assert ran.code == 0, ran.out + ran.err
    if remembered_by == "status":
        assert audit(repo.path, "status").code == 0
    elif remembered_by == "push-judgement":
        assert audit(repo.path, "status", "--for", "refs/heads/main", "HEAD").code == 0
    repo.write("tools/verdict", "changed\n")  # what the run relied on, outside the tree
    run = run_hook(repo.path, "stop", stop(repo.path))
    assert run.blocked, run.stdout + run.stderr
    assert CHANGED in run.reason
    judged = audit(repo.path, "status")
    assert judged.code == 3 and judged.out.startswith("UNKNOWN") and CHANGED in judged.out
