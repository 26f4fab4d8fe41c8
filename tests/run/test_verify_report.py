"""`git audit verify` (incremental, rewinds, tampering) and `git audit report`."""

from __future__ import annotations

import json

import pygit2

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import open_repo
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def two_runs(repo: GitRepo, sealed: Sealer) -> None:
    sealed(
        make_plan(
            run_step("a", "true", outputs={"o": "README.md"}),
            run_step("b", "true", deps=["a"], requires=[("a", "o")]),
        )
    )
    assert audit(repo.path, "run").code == 0
    assert audit(repo.path, "run").code == 0


def test_verify_is_incremental(repo: GitRepo, sealed: Sealer) -> None:
    two_runs(repo, sealed)
    first = audit(repo.path, "verify", "--json").json()
    assert first["verdict"] == "PASS"
    assert first["verified"]["refs/audit/runs/default"] == 2
    second = audit(repo.path, "verify", "--json").json()
    assert second["verdict"] == "PASS" and second["verified"]["refs/audit/runs/default"] == 0
    assert audit(repo.path, "run").code == 0
    third = audit(repo.path, "verify", "--json").json()
    assert third["verified"]["refs/audit/runs/default"] == 1


def test_verify_catches_a_rewind_and_a_deletion(repo: GitRepo, sealed: Sealer) -> None:
    two_runs(repo, sealed)
    assert audit(repo.path, "verify").code == 0
    repo.git("update-ref", "refs/audit/runs/default", "refs/audit/runs/default~1")
    rewound = audit(repo.path, "verify")
    assert rewound.code == 1 and "moved backwards or was rewritten" in rewound.out
    status = audit(repo.path, "status")
    assert status.code == 1 and "moved backwards" in status.out
    repo.git("update-ref", "-d", "refs/audit/runs/default")
    deleted = audit(repo.path, "verify")
    assert deleted.code == 1 and "was deleted" in deleted.out


def test_verify_catches_an_untrusted_commit_and_a_missing_output(
    repo: GitRepo, sealed: Sealer
) -> None:
    two_runs(repo, sealed)
    git = open_repo(repo.path).git
    tip = git.references["refs/audit/runs/default"].target
    commit = git[tip]
    assert isinstance(commit, pygit2.Commit)
    forged = create_signed_commit(
        git,
        tree=commit.tree_id,
        parents=[tip],
        message="forged\n",
        signer=Ed25519Signer.generate("x"),
    )
    repo.git("update-ref", "refs/audit/runs/default", str(forged))
    bad = audit(repo.path, "verify")
    assert bad.code == 1 and "untrusted key" in bad.out


def test_status_json_is_the_documented_document(repo: GitRepo, sealed: Sealer) -> None:
    two_runs(repo, sealed)
    doc = audit(repo.path, "status", "--json").json()
    assert set(doc) == {"verdict", "tree", "plans", "reasons"}
    (plan,) = doc["plans"]
    assert set(plan) == {"name", "verdict", "run", "reasons", "notes"} and plan["verdict"] == "PASS"
    assert plan["notes"] == []  # nothing beyond the tree: a private checkout, no ignored paths
    repo.write("new.txt", "x\n")
    doc = audit(repo.path, "status", "--json").json()
    (reason,) = doc["plans"][0]["reasons"]
    assert set(reason) == {"code", "message", "hint", "step"}
    assert reason["code"] == "evidence.missing" and reason["hint"] == "git audit run --plan default"


def test_report_markdown_and_json(repo: GitRepo, sealed: Sealer) -> None:
    two_runs(repo, sealed)
    report = audit(repo.path, "report")
    assert report.code == 0
    text = report.out
    tip = repo.git("rev-parse", "refs/audit/runs/default").strip()
    assert text.startswith("## gitaudit: ✅ PASS")
    assert "| R (must) | a | passed |" in text
    assert f"Evidence: run commit `{tip}`" in text
    assert "```mermaid" in text and ":::verified" in text
    doc = json.loads(audit(repo.path, "report", "--format", "json").out)
    assert doc["verdict"] == "PASS"
    assert (
        doc["plans"][0]["previous_run"]
        == repo.git("rev-parse", "refs/audit/runs/default~1").strip()
    )


def test_report_shows_what_changed_since_the_previous_run(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "test", "-f", "flag")))
    assert audit(repo.path, "run").code == 1
    (repo.path / "flag").write_text("")
    assert audit(repo.path, "run").code == 0
    text = audit(repo.path, "report").out
    assert "- step a: failed → passed" in text


def test_verify_names_a_deleted_ref_by_any_mark_and_only_refs_it_reads() -> None:
    """A ref verify reads (plans, agents, runs) that any mark names counts as deleted when it is
    gone: a verified mark, a seen one, or the floor in the gitaudit home; a mark of a ref verify
    does not read (a mirror of a remote's runs) is not a deletion."""
    from gitaudit.ledger.verify import _marked

    marks = {
        "verified": {"refs/audit/plans": "a" * 40},
        "seen": {"refs/audit/runs/x": "b" * 40, "refs/gitaudit/remotes/o/audit/runs/x": "c" * 40},
        "home": {"refs/audit/agents": "d" * 40, "refs/audit/plans": "e" * 40},
        "macs": {},
    }
    assert _marked(marks) == {
        "refs/audit/plans": "a" * 40,
        "refs/audit/runs/x": "b" * 40,
        "refs/audit/agents": "d" * 40,
    }


def test_verify_catches_a_runs_ref_deleted_that_only_a_run_marked(
    repo: GitRepo, sealed: Sealer
) -> None:
    two_runs(repo, sealed)  # a run marks its ref seen; verify never ran
    repo.git("update-ref", "-d", "refs/audit/runs/default")
    deleted = audit(repo.path, "verify")
    assert deleted.code == 1 and "refs/audit/runs/default was deleted" in deleted.out
