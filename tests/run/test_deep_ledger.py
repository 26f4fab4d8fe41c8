"""The gate confirms the lookup cache's answer for evidence deep in the ledger too (git's own
search past a few hundred commits)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from gitaudit.cli.context import signer_for
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger import lookup
from gitaudit.ledger.runs import append_run
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def _pad(repo: GitRepo, count: int, *, tree: str | None = None) -> list[str]:
    """*count* signed run commits copying the tip's run.json, for another tree unless *tree*."""
    handle = open_repo(repo.path)
    signer = signer_for(handle, None)
    doc = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))
    contract = doc["contract_digest"]
    out = []
    for i in range(count):
        doc["tree"] = tree or f"{i:040x}"
        message = f"audit(default): PASS\n\nAudit-Tree: {doc['tree']}\nAudit-Contract: {contract}\n"
        out.append(
            str(
                append_run(
                    handle.git, "default", {"run.json": json.dumps(doc).encode()}, message, signer
                )
            )
        )
    return out


def test_deep_evidence_is_confirmed_and_a_lying_cache_is_caught(
    repo: GitRepo, sealed: Sealer
) -> None:
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    genuine = repo.git("rev-parse", "refs/audit/runs/default").strip()
    _pad(repo, 300)
    assert judge(open_repo(repo.path), "HEAD").verdict == "PASS"  # 300 runs deep: git confirms
    newer = _pad(repo, 1, tree=repo.head_tree())[0]
    _pad(repo, 300)
    handle = open_repo(repo.path)
    assert judge(handle, "HEAD").plans[0].run == newer
    db = sqlite3.connect(handle.gitdir / "gitaudit" / "index.sqlite")
    db.execute("UPDATE runs SET tree='x' WHERE commit_id=?", (newer,))  # the cache hides it
    db.commit()
    db.close()
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL" and result.plans[0].reasons[0].code == "evidence.ledger"
    assert f"the newest is {newer[:12]}" in result.plans[0].reasons[0].message
    assert genuine


def test_a_remembered_confirmation_walks_only_the_newer_runs(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the run was confirmed newest at a tip, the next judgement walks down to that tip
    only: git's whole-chain search is not asked again, however deep the run lies."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _pad(repo, 300)
    assert judge(open_repo(repo.path), "HEAD").verdict == "PASS"  # walks once, remembers
    _pad(repo, 5)

    def no_deep_walk(*args: object) -> None:
        raise AssertionError("the remembered confirmation was not used")

    monkeypatch.setattr(lookup, "_confirm_with_git", no_deep_walk)
    assert judge(open_repo(repo.path), "HEAD").verdict == "PASS"


def test_a_remembered_confirmation_never_hides_a_newer_run(repo: GitRepo, sealed: Sealer) -> None:
    """A newer run for the tree after the remembered tip is found by the walk down to it, and a
    statement that does not carry the local key's MAC (forged, or moved to another tip) counts
    for nothing."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    genuine = repo.git("rev-parse", "refs/audit/runs/default").strip()
    _pad(repo, 3)
    assert judge(open_repo(repo.path), "HEAD").plans[0].run == genuine  # remembered
    newer = _pad(repo, 1, tree=repo.head_tree())[0]
    _pad(repo, 3)
    handle = open_repo(repo.path)
    db = sqlite3.connect(handle.gitdir / "gitaudit" / "index.sqlite")
    judge(handle, "HEAD")
    db.execute("UPDATE runs SET tree='x' WHERE commit_id=?", (newer,))  # the cache hides it
    db.commit()
    db.close()
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL" and result.plans[0].reasons[0].code == "evidence.ledger"
    assert newer[:12] in result.plans[0].reasons[0].message

    # a statement moved to the current tip without the key: ignored, the walk still catches it
    path = handle.gitdir / "gitaudit" / lookup.CONFIRMED
    doc = json.loads(path.read_text())
    tip = repo.git("rev-parse", "refs/audit/runs/default").strip()
    for item in doc["statements"]:
        if item["run"] == genuine:
            item["through"] = tip
    path.write_text(json.dumps(doc))
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL" and newer[:12] in result.plans[0].reasons[0].message
