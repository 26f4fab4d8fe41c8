"""Hooks end to end: real `git commit` and `git push` against a real bare server."""

from __future__ import annotations

import json
import subprocess
import sys

import pygit2

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import open_repo
from tests.e2e.conftest import PLAN, Setup
from tests.gitrepo import audit, forget_marks


def run_pass(setup: Setup) -> None:
    result = audit(setup.client.path, "run")
    assert result.code == 0, result.out + result.err


def test_passing_push_with_evidence_in_the_same_push(setup: Setup) -> None:
    run_pass(setup)
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stderr
    assert setup.server_ref("refs/heads/main") == setup.client.git("rev-parse", "HEAD").strip()
    assert setup.server_ref("refs/audit/runs/default") is not None
    status = audit(setup.server, "status", "main")
    assert status.code == 0, status.out


def test_unknown_push_is_blocked_by_the_client_and_the_server(setup: Setup) -> None:
    run_pass(setup)
    assert setup.audit_push().returncode == 0
    setup.client.write("notes.md", "new file without evidence\n")
    setup.client.commit("more")
    blocked = setup.audit_push()
    assert blocked.returncode != 0
    assert "gitaudit: push of refs/heads/main" in blocked.stderr and "UNKNOWN" in blocked.stderr
    assert "git audit run --plan default" in blocked.stderr
    forced = setup.push("--no-verify", "origin", "main")
    assert forced.returncode != 0
    assert "pre-receive hook declined" in forced.stderr and "no evidence for tree" in forced.stderr


def test_failing_check_blocks_and_no_verify_is_caught(setup: Setup) -> None:
    run_pass(setup)
    assert setup.audit_push().returncode == 0
    setup.client.write("greeting.txt", "goodbye\n")
    setup.client.commit("break the greeting")
    run = audit(setup.client.path, "run")
    assert run.code == 1
    status = audit(setup.client.path, "status")
    assert status.code == 1 and "FAIL" in status.out
    blocked = setup.audit_push()
    assert blocked.returncode != 0 and "FAIL" in blocked.stderr
    # the evidence of the failure may travel; the branch may not
    forced = setup.push("--no-verify", "--atomic", "origin", "main", "refs/audit/runs/default")
    assert forced.returncode != 0 and "step check failed" in forced.stderr
    assert setup.server_ref("refs/heads/main") != setup.client.git("rev-parse", "HEAD").strip()


def test_branch_deletion_passes(setup: Setup) -> None:
    run_pass(setup)
    assert setup.audit_push().returncode == 0
    setup.client.git("branch", "topic")
    assert setup.push("origin", "topic").returncode == 0
    deleted = setup.push("origin", ":topic")
    assert deleted.returncode == 0, deleted.stderr


def test_forged_evidence_signed_by_an_untrusted_key_is_rejected(setup: Setup) -> None:
    run_pass(setup)
    repo = open_repo(setup.client.path)
    tip = repo.git.references["refs/audit/runs/default"].target
    commit = repo.git[tip].peel(pygit2.Commit)
    mallory = Ed25519Signer.generate("mallory")
    forged = create_signed_commit(
        repo.git,
        tree=commit.tree_id,
        parents=[tip],
        message="audit(default): PASS forged\n",
        signer=mallory,
    )
    setup.client.git("update-ref", "refs/audit/runs/default", str(forged))
    pushed = setup.push("--no-verify", "--atomic", "origin", "main", "refs/audit/runs/default")
    assert pushed.returncode != 0
    assert "evidence must be signed by a runner trusted on the server" in pushed.stderr
    assert setup.server_ref("refs/audit/runs/default") is None


def test_evidence_for_another_tree_does_not_count(setup: Setup) -> None:
    run_pass(setup)  # evidence for the current tree
    setup.client.write("other.txt", "x\n")
    setup.client.commit("a different tree, no evidence for it")
    pushed = setup.push("--no-verify", "--atomic", "origin", "main", "refs/audit/runs/default")
    assert pushed.returncode != 0 and "no evidence for tree" in pushed.stderr


def test_plan_edited_after_sealing_fails(setup: Setup) -> None:
    run_pass(setup)
    weaker = json.loads(json.dumps(PLAN))
    weaker["steps"][1]["verify"] = [{"type": "run", "argv": ["true"]}]
    setup.client.write_plan(weaker)
    setup.client.commit("quietly weaken the plan")
    status = audit(setup.client.path, "status", "HEAD")
    assert status.code == 1 and "differs from its seal" in status.out
    pushed = setup.push("--no-verify", "origin", "main")
    assert pushed.returncode != 0 and "differs from its seal" in pushed.stderr


def test_deleting_a_sealed_named_plan_does_not_hide_it(setup: Setup) -> None:
    setup.client.write_plan(PLAN, "backend")
    setup.client.commit("backend plan")
    assert audit(setup.client.path, "plan", "seal", "--plan", "backend").code == 0
    (setup.client.path / ".gitaudit/plans/backend.json").unlink()
    setup.client.commit("drop the backend plan file")
    run_pass(setup)
    status = audit(setup.client.path, "status")
    assert status.code == 1
    assert "sealed as active but .gitaudit/plans/backend.json is not in this tree" in status.out
    assert setup.push("origin", "refs/audit/plans").returncode == 0
    pushed = setup.push("--no-verify", "--atomic", "origin", "main", "refs/audit/runs/default")
    assert (
        pushed.returncode != 0
        and "plan.missing" not in pushed.stderr
        and "backend" in pushed.stderr
    )


def test_rewritten_plans_ref_is_rejected(setup: Setup) -> None:
    repo = open_repo(setup.client.path)
    tip = repo.git.references["refs/audit/plans"].target
    commit = repo.git[tip].peel(pygit2.Commit)
    mallory = Ed25519Signer.generate("mallory")
    forged = create_signed_commit(
        repo.git, tree=commit.tree_id, parents=[tip], message="trust: sneak in\n", signer=mallory
    )
    setup.client.git("update-ref", "refs/audit/plans", str(forged))
    pushed = setup.push("origin", "refs/audit/plans")
    assert pushed.returncode != 0 and "not signed by a trusted sealer" in pushed.stderr


def test_non_fast_forward_audit_refs_and_deletion_are_rejected(setup: Setup) -> None:
    run_pass(setup)
    run_pass(setup)
    assert setup.audit_push().returncode == 0  # the server has R1 <- R2
    first = setup.client.git("rev-parse", "refs/audit/runs/default~1").strip()
    setup.client.git("update-ref", "refs/audit/runs/default", first)
    # a deliberate rewind: without its marks the client runs on it (with them it refuses)
    forget_marks(setup.client.path / ".git")
    # another tree: a run of R2's tree on R1 within the same second is R2 itself, byte for byte
    # (Ed25519 signatures are deterministic), and the push would find nothing to update
    setup.client.write("later.txt", "a later commit\n")
    setup.client.commit("later")
    run_pass(setup)  # R3 on top of R1: a sibling of the server's R2
    r3 = setup.client.git("rev-parse", "refs/audit/runs/default").strip()
    assert r3 != setup.server_ref("refs/audit/runs/default")
    assert setup.client.git("rev-parse", f"{r3}~1").strip() == first
    rewind = setup.push("--force", "origin", "refs/audit/runs/default")
    assert rewind.returncode != 0 and "not a fast-forward" in rewind.stderr
    delete = setup.push("origin", ":refs/audit/runs/default")
    assert delete.returncode != 0 and "audit refs cannot be deleted" in delete.stderr


def test_plans_change_signed_by_a_runner_key_is_rejected(setup: Setup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ci", "-f", str(tmp_path / "ci")],
        check=True,
    )
    assert (
        audit(
            setup.client.path,
            "trust",
            "add",
            str(tmp_path / "ci.pub"),
            "--role",
            "runner",
            "--name",
            "ci",
        ).code
        == 0
    )
    assert setup.push("origin", "refs/audit/plans").returncode == 0
    repo = open_repo(setup.client.path)
    tip = repo.git.references["refs/audit/plans"].target
    from gitaudit.crypto.keystore import load_signer

    runner = load_signer(tmp_path / "ci")
    forged = create_signed_commit(
        repo.git,
        tree=repo.git[tip].peel(pygit2.Commit).tree_id,
        parents=[tip],
        message="policy: relax\n",
        signer=runner,
    )
    setup.client.git("update-ref", "refs/audit/plans", str(forged))
    pushed = setup.push("origin", "refs/audit/plans")
    assert pushed.returncode != 0 and "not signed by a trusted sealer" in pushed.stderr


def test_commit_msg_adds_trailers_and_blocks_claims(setup: Setup) -> None:
    run_pass(setup)
    env = setup.env()
    setup.client.write("greeting.txt", "hello again\n")
    subprocess.run(["git", "add", "-A"], cwd=setup.client.path, check=True)
    claim = subprocess.run(
        ["git", "commit", "-q", "-m", "update\n\nCloses REQ-2"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert claim.returncode != 0 and "claims completion" in claim.stderr
    plain = subprocess.run(
        ["git", "commit", "-q", "-m", "update without a claim"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert plain.returncode == 0, plain.stderr
    assert audit(setup.client.path, "run").code == 0
    setup.client.write("extra.txt", "x\n")
    assert audit(setup.client.path, "run").code == 0
    subprocess.run(["git", "add", "-A"], cwd=setup.client.path, check=True)
    done = subprocess.run(
        ["git", "commit", "-q", "-m", "finish\n\nAudit-Claim: done"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    message = setup.client.git("log", "-1", "--format=%B")
    assert "Audit-Verdict: PASS" in message and "Audit-Run: " in message


def test_strict_commit_msg_blocks_any_commit_without_pass(setup: Setup) -> None:
    setup.client.git("config", "audit.commitMsg", "strict")
    setup.client.write("x.txt", "x\n")
    subprocess.run(["git", "add", "-A"], cwd=setup.client.path, check=True)
    blocked = subprocess.run(
        ["git", "commit", "-q", "-m", "anything"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=setup.env(),
        check=False,
    )
    assert blocked.returncode != 0 and "strict" in blocked.stderr


def test_hook_install_keeps_and_restores_a_legacy_hook(setup: Setup) -> None:
    hooks = setup.client.path / ".git" / "hooks"
    (hooks / "pre-push").unlink()
    (hooks / "pre-push").write_text("#!/bin/sh\necho legacy-ran >&2\n")
    (hooks / "pre-push").chmod(0o755)
    installed = audit(setup.client.path, "hooks", "install")
    assert "pre-push: kept-legacy" in installed.out and "commit-msg: current" in installed.out
    run_pass(setup)
    pushed = setup.audit_push()
    assert pushed.returncode == 0 and "legacy-ran" in pushed.stderr
    removed = audit(setup.client.path, "hooks", "uninstall")
    assert "pre-push: restored" in removed.out
    assert "legacy-ran" in (hooks / "pre-push").read_text()
    assert not (hooks / "commit-msg").exists()


def test_doctor_reports_pass_on_a_healthy_repository(setup: Setup) -> None:
    run_pass(setup)
    doctor = audit(setup.client.path, "doctor")
    assert doctor.code == 0, doctor.out
    assert "ok  hooks" in doctor.out and "ok  refspecs" in doctor.out
    fetch = setup.client.git("config", "--get-all", "remote.origin.fetch")
    assert "+refs/audit/*:refs/gitaudit/remotes/origin/audit/*" in fetch
    assert "refs/audit/*:refs/audit/*" not in fetch
    _ = sys


def test_runs_from_two_machines_are_replayed_not_lost(setup: Setup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_pass(setup)
    assert setup.audit_push().returncode == 0
    other = tmp_path / "other"
    subprocess.run(
        ["git", "clone", "-q", str(setup.server), str(other)], check=True, env=setup.env()
    )
    subprocess.run(
        ["git", "fetch", "-q", "origin", "refs/audit/*:refs/audit/*"],
        cwd=other,
        check=True,
        env=setup.env(),
    )
    subprocess.run(
        ["git", "config", "audit.rootKey", setup.client.git("config", "audit.rootKey").strip()],
        cwd=other,
        check=True,
    )
    assert audit(other, "run").code == 0  # same key (same HOME), another machine's ledger
    assert (
        subprocess.run(
            [sys.executable, "-m", "gitaudit", "push"],
            cwd=other,
            env=setup.env(),
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    setup.client.write("more.txt", "more\n")
    setup.client.commit("more")
    run_pass(setup)
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "refs/audit/runs/default: rebased 1" in pushed.stdout
    count = subprocess.run(
        ["git", "rev-list", "--count", "refs/audit/runs/default"],
        cwd=setup.server,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert count == "3"
    assert audit(setup.server, "status", "main").code == 0
