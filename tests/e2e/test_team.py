"""Many clones, one server: everyday git keeps working, evidence recorded elsewhere counts, a
reseal travels before the commits it governs, and the server explains what is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import PLAN, Setup
from tests.gitrepo import audit, git


def clone(setup: Setup, path: Path) -> Path:
    """Another developer's clone: plain `git clone`, then `git audit init` (refspecs, hooks)."""
    git(path.parent, "clone", "-q", str(setup.server), str(path))
    git(path, "config", "audit.rootKey", setup.client.git("config", "audit.rootKey").strip())
    assert audit(path, "hooks", "install").code == 0
    assert audit(path, "sync").code == 0
    return path


def gate(path: Path, *args: str) -> dict[str, object]:
    result = audit(path, "status", *args, "--json")
    return dict(result.json())


def plan_notes(doc: dict[str, object]) -> list[str]:
    plans = doc["plans"]
    assert isinstance(plans, list)
    return [n for p in plans for n in p.get("notes", [])]


def test_fetch_and_pull_keep_working_when_the_audit_refs_diverge(
    setup: Setup, tmp_path: Path
) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    other = clone(setup, tmp_path / "other")
    # both clones record runs the other does not have, and one of them pushes
    assert audit(other, "run", "--fresh").code == 0
    assert audit(setup.client.path, "run", "--fresh").code == 0
    assert setup.audit_push().returncode == 0
    # plain git in the other clone: the audit refs travel in their own namespace, forced
    assert git(other, "fetch", "-q", "origin") == ""
    assert git(other, "pull", "-q", "--ff-only") == ""
    mirror = git(other, "rev-parse", "refs/gitaudit/remotes/origin/audit/runs/default").strip()
    assert mirror == setup.server_ref("refs/audit/runs/default")
    local = git(other, "rev-parse", "refs/audit/runs/default").strip()
    assert local != mirror  # the local ledger was not touched by the fetch
    assert audit(other, "status").code == 0


def test_evidence_fetched_from_the_remote_counts_without_running_again(
    setup: Setup, tmp_path: Path
) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    other = clone(setup, tmp_path / "other")
    local_before = git(other, "rev-parse", "refs/audit/runs/default").strip()
    # the first clone moves on, records and pushes; the other only pulls, with plain git
    setup.client.write("more.txt", "more\n")
    setup.client.commit("more")
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    assert git(other, "pull", "-q", "--ff-only") == ""
    assert git(other, "rev-parse", "refs/audit/runs/default").strip() == local_before
    judged = gate(other)
    assert judged["verdict"] == "PASS", judged
    assert any("fetched from origin" in n for n in plan_notes(judged))
    # the fetched copy is guarded like the local ledger: once seen, rewinding it is caught
    mirror = "refs/gitaudit/remotes/origin/audit/runs/default"
    git(other, "update-ref", mirror, f"{mirror}~1")
    rewound = gate(other)
    assert rewound["verdict"] == "FAIL"
    assert "moved backwards" in json.dumps(rewound)


def test_a_fetched_ledger_that_does_not_verify_is_ignored_not_fatal(
    setup: Setup, tmp_path: Path
) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    other = clone(setup, tmp_path / "other")
    # a fork's ledger: a copy of a real run, re-committed without a trusted signature
    real = git(other, "rev-parse", "refs/audit/runs/default").strip()
    tree = git(other, "rev-parse", f"{real}^{{tree}}").strip()
    message = git(other, "log", "-1", "--format=%B", real)
    forged = git(other, "commit-tree", "-m", message, tree).strip()
    git(other, "update-ref", "refs/gitaudit/remotes/fork/audit/runs/default", forged)
    git(other, "update-ref", "-d", "refs/audit/runs/default")
    judged = gate(other)
    assert judged["verdict"] == "PASS", judged
    assert any("fork's copy" in n and "is ignored" in n for n in plan_notes(judged))


def test_a_remote_plans_ref_ahead_is_adopted_and_a_diverged_one_explained(
    setup: Setup, tmp_path: Path
) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    other = clone(setup, tmp_path / "other")
    # the first clone reseals (a stronger plan) and pushes it with its evidence
    stronger = json.loads(json.dumps(PLAN))
    stronger["steps"][1]["verify"].append({"type": "run", "argv": ["true"]})
    setup.client.write_plan(stronger)
    setup.client.commit("stronger plan")
    assert audit(setup.client.path, "plan", "seal", "-m", "stronger").code == 0
    assert audit(setup.client.path, "run").code == 0
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    # the other clone: a plain pull brings the commit; sync adopts the seal it needs
    git(other, "pull", "-q")
    synced = audit(other, "sync")
    assert synced.code == 0, synced.err
    assert "origin: refs/audit/plans: fast-forwarded" in synced.out
    assert git(other, "rev-parse", "refs/audit/plans").strip() == setup.server_ref(
        "refs/audit/plans"
    )
    assert "origin: refs/audit/runs/default: fast-forwarded" in synced.out
    assert audit(other, "status").code == 0
    # both reseal: the plans refs diverge, and sync says how to resolve it
    for repo, word in ((setup.client.path, "first"), (other, "second")):
        plan = json.loads(json.dumps(stronger))
        plan["task"] = f"{word} change"
        (repo / ".gitaudit" / "plans" / "default.json").write_text(json.dumps(plan))
        assert audit(repo, "plan", "seal", "-m", word).code == 0
    # the first clone's reseal reaches the server (the branch itself is up to date)
    first = setup.audit_push()
    assert first.returncode == 0, first.stdout + first.stderr
    assert (
        setup.server_ref("refs/audit/plans")
        == git(setup.client.path, "rev-parse", "refs/audit/plans").strip()
    )
    diverged = audit(other, "sync")
    assert diverged.code == 1
    assert "refs/audit/plans has diverged from 'origin'" in diverged.err
    assert "git audit sync origin --take-remote-plans" in diverged.err
    taken = audit(other, "sync", "--take-remote-plans")
    assert taken.code == 0, taken.err
    assert "replaced by the remote's (1 local-only seal(s) dropped)" in taken.out
    resealed = audit(other, "plan", "seal", "-m", "second, on top")
    assert resealed.code == 0, resealed.err
    assert audit(other, "verify").code == 0


def test_push_after_a_reseal_sends_the_plans_first(setup: Setup) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    stronger = json.loads(json.dumps(PLAN))
    stronger["steps"][1]["verify"].append({"type": "run", "argv": ["true"]})
    setup.client.write_plan(stronger)
    setup.client.commit("stronger plan")
    assert audit(setup.client.path, "plan", "seal", "-m", "stronger").code == 0
    assert audit(setup.client.path, "run").code == 0
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert setup.server_ref("refs/heads/main") == setup.client.git("rev-parse", "HEAD").strip()
    assert (
        setup.server_ref("refs/audit/plans")
        == setup.client.git("rev-parse", "refs/audit/plans").strip()
    )
    assert audit(setup.server, "status", "main").code == 0


def test_the_server_asks_for_evidence_that_was_not_pushed(setup: Setup) -> None:
    assert audit(setup.client.path, "run").code == 0
    # a plain push of the branch: the client hook passes (the evidence is here), the server
    # does not have it
    plain = setup.push("origin", "main")
    assert plain.returncode != 0
    assert "push your evidence with the branch: `git audit push`" in plain.stderr, plain.stderr
    assert "fix: git audit run --plan default" not in plain.stderr
    assert setup.audit_push().returncode == 0


def pre_commit_hook(cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRE_COMMIT")}
    return subprocess.run(
        [sys.executable, "-m", "gitaudit.hooks", "pre-commit-push"],
        cwd=cwd,
        env={**env, **variables},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_pre_commit_framework_hook_leaves_audit_refs_to_the_server(setup: Setup) -> None:
    client = setup.client.path
    assert audit(client, "run").code == 0
    runs_tip = setup.client.git("rev-parse", "refs/audit/runs/default").strip()
    head = setup.client.git("rev-parse", "HEAD").strip()
    # the runs ref first (the branch was already pushed): a run is not judged as code
    audit_ref = pre_commit_hook(
        client,
        PRE_COMMIT_REMOTE_BRANCH="refs/audit/runs/default",
        PRE_COMMIT_TO_REF=runs_tip,
        PRE_COMMIT_FROM_REF="0" * 40,
    )
    assert audit_ref.returncode == 0, audit_ref.stderr
    proven = pre_commit_hook(
        client, PRE_COMMIT_REMOTE_BRANCH="refs/heads/main", PRE_COMMIT_TO_REF=head
    )
    assert proven.returncode == 0, proven.stderr
    setup.client.write("untested.txt", "x\n")
    untested = setup.client.commit("untested")
    blocked = pre_commit_hook(
        client, PRE_COMMIT_REMOTE_BRANCH="refs/heads/main", PRE_COMMIT_TO_REF=untested
    )
    assert blocked.returncode == 1
    assert "is blocked: the gate says UNKNOWN" in blocked.stderr
    # the work tree, without the variables
    assert pre_commit_hook(client).returncode == 1


def test_doctor_checks_the_refspec_of_a_remote_added_later(setup: Setup, tmp_path: Path) -> None:
    client = setup.client.path
    assert "ok  refspecs: 1 remote(s) fetch refs/audit/*" in audit(client, "doctor").out
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(setup.server), str(mirror))
    git(client, "remote", "add", "mirror", str(mirror))  # after `git audit init`
    doctor = audit(client, "doctor")
    assert doctor.code != 0
    assert "BAD refspecs: remotes without the audit fetch refspec: mirror (absent)" in doctor.out
    assert "git audit sync" in doctor.out  # the fix it names
    synced = audit(client, "sync", "mirror")
    assert synced.code == 0, synced.err
    assert "fetch refspec for mirror: installed" in synced.out
    assert "+refs/audit/*:refs/gitaudit/remotes/mirror/audit/*" in git(
        client, "config", "--get-all", "remote.mirror.fetch"
    )
    assert "ok  refspecs: 2 remote(s) fetch refs/audit/*" in audit(client, "doctor").out
    assert git(client, "fetch", "-q", "mirror") == ""
    assert git(client, "rev-parse", "refs/gitaudit/remotes/mirror/audit/plans").strip() == (
        setup.server_ref("refs/audit/plans")
    )
