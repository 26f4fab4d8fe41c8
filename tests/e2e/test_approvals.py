"""Approvals across machines: alice proposes a weakening in her clone and pushes the proposal;
bob, in his own clone, fetches it, approves it and pushes the applied change; the server's
pre-receive checks every step. Real git, real CLI, one bare server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pygit2

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.git.repo import open_repo
from tests.e2e.conftest import PLAN, Setup
from tests.e2e.conftest import setup as setup  # noqa: PLC0414 (re-exported fixture)
from tests.gitrepo import GitRepo, audit, git

PLANS = "refs/audit/plans"


def _ok(cwd: Path, *args: str) -> str:
    result = audit(cwd, *args)
    assert result.code == 0, (args, result.out, result.err)
    return result.out


def _push_audit(cwd: Path, setup: Setup) -> subprocess.CompletedProcess[str]:
    """`git audit push --evidence-only` in *cwd*: every audit ref, no branch."""
    return subprocess.run(
        [sys.executable, "-m", "gitaudit", "push", "--evidence-only"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=setup.env(),
    )


def _weaker_plan() -> dict[str, Any]:
    plan: dict[str, Any] = json.loads(json.dumps(PLAN))
    plan["steps"][1]["verify"] = [{"type": "run", "argv": ["true"]}]
    return plan


def test_a_weakening_needs_two_sealers_on_two_machines(setup: Setup, tmp_path: Path) -> None:
    alice = setup.client
    bob_key = generate_key("bob")
    pub = bob_key.private_path.with_suffix(".pub")
    _ok(alice.path, "trust", "add", str(pub), "--role", "sealer", "--name", "bob")
    _ok(alice.path, "trust", "policy", "--approvals", "weaken=2")
    alice.write_plan(_weaker_plan())
    alice.commit("the check step trusts the build")
    proposed = _ok(alice.path, "plan", "seal", "--allow-weaken", "--reason", "build checks it")
    assert "proposed as " in proposed and "nothing is applied yet" in proposed, proposed
    pid = proposed.split("proposed as ", 1)[1].split(":", 1)[0]
    assert f"next: another sealer reviews it (`git audit proposals {pid}`)" in proposed
    listed = _ok(alice.path, "proposals")
    assert f"{pid}  pending  1/2" in listed, listed
    pushed = _push_audit(setup.client.path, setup)
    assert pushed.returncode == 0, pushed.stderr
    assert setup.server_ref(f"refs/audit/proposals/{pid}") is not None

    bob = GitRepo(tmp_path / "bob")
    git(tmp_path, "clone", "-q", str(setup.server), str(bob.path))
    _ok(bob.path, "sync", "origin")
    shown = _ok(bob.path, "proposals", pid)
    assert "approvals  1 of 2 (default)" in shown and "changed    plans/default.json" in shown
    assert "from       origin" in shown, shown
    approved = _ok(bob.path, "approve", pid, "--key", str(bob_key.private_path))
    assert "approved " + pid + ": 2 of 2 (bob, default)" in approved, approved
    assert "applied to refs/audit/plans as" in approved
    bob.git("config", "audit.signingKey", str(bob_key.private_path))
    pushed = _push_audit(bob.path, setup)
    assert pushed.returncode == 0, pushed.stderr
    assert setup.server_ref(PLANS) == bob.git("rev-parse", PLANS).strip()

    _ok(alice.path, "sync", "origin")
    assert f"{pid}  applied" in _ok(alice.path, "proposals")
    assert f"deleted refs/audit/proposals/{pid}" in _ok(alice.path, "proposals", "--prune")
    history = _ok(alice.path, "plan", "history")
    assert "v2 weakened" in history, history


def test_the_server_refuses_a_proposal_it_cannot_trust(setup: Setup) -> None:
    """A proposal signed by a key the server does not trust as a sealer is refused; a pending
    proposal cannot be deleted; once stale, it can."""
    alice = setup.client
    bob_key = generate_key("bob")
    pub = bob_key.private_path.with_suffix(".pub")
    _ok(alice.path, "trust", "add", str(pub), "--role", "sealer", "--name", "bob")
    _ok(alice.path, "trust", "policy", "--approvals", "trust=2")
    pushed = _push_audit(setup.client.path, setup)
    assert pushed.returncode == 0, pushed.stderr
    mallory = generate_key("mallory")
    proposed = _ok(
        alice.path,
        "trust",
        "add",
        str(mallory.private_path.with_suffix(".pub")),
        "-r",
        "runner",
        "-n",
        "mallory",
    )
    pid = proposed.split("proposed as ", 1)[1].split(":", 1)[0]
    ref = f"refs/audit/proposals/{pid}"
    # mallory signs a commit on the proposal: the server trusts her as nothing
    git_ = open_repo(alice.path).git
    tip = git_.revparse_single(ref).peel(pygit2.Commit)
    forged = create_signed_commit(
        git_,
        tree=tip.tree_id,
        parents=[tip.id],
        message="approve\n",
        signer=load_signer(mallory.private_path),
    )
    refused = setup.push("origin", f"{forged}:{ref}")
    assert refused.returncode != 0 and f"rejecting {ref}" in refused.stderr, refused.stderr
    assert "a proposal is signed by a sealer trusted on the server" in refused.stderr
    assert setup.push("origin", f"{ref}:{ref}").returncode == 0
    kept = setup.push("origin", f":{ref}")
    assert "a pending proposal cannot be deleted" in kept.stderr, kept.stderr
    _ok(alice.path, "trust", "policy", "--commit-msg", "strict")  # needs no approval
    assert _push_audit(setup.client.path, setup).returncode == 0
    assert setup.push("origin", f":{ref}").returncode == 0
    assert setup.server_ref(ref) is None
