"""Reproducers of the last crashes fuzzing found (lone surrogates in ledger files), now fixed:
each asserts the behaviour that replaced the crash. New open crashes get an
``xfail(strict=True, raises=...)`` reproducer here and an entry in :mod:`tests.fuzz.known_bugs`
(see :func:`reproduce`), removed together when fixed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from gitaudit.errors import LedgerError, TrustError
from gitaudit.git.repo import open_repo
from gitaudit.ledger import index
from gitaudit.ledger.objects import read_files, write_tree
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.trust import POLICY_FORMAT, Policy
from gitaudit.run.recorder import run_plan
from tests.adversarial.conftest import honest_run_on_any_tip
from tests.fuzz._support import (
    bare_repo,
    commit_files,
    gate_signer,
    gate_world,
    ideal_doc,
    install_run,
    judge_gate,
)
from tests.fuzz.known_bugs import KNOWN_BUGS, gitaudit_frames, known_bug


def reproduce(name: str, action: Callable[[], object]) -> None:
    """Run *action*; its exception must be the registered bug *name* (then it is re-raised)."""
    assert name in {b.name for b in KNOWN_BUGS}
    try:
        action()
    except Exception as exc:
        bug = known_bug(exc, honour_strict=False)
        assert bug is not None and bug.name == name, (name, type(exc), gitaudit_frames(exc))
        raise


# ----------------------------------------------------------------------------- index


@pytest.mark.parametrize("field", ["verdict", "tree", "status", "step-id"])
def test_index_sync_survives_a_lone_surrogate_in_run_json(field: str) -> None:
    """Was UnicodeEncodeError binding the string into SQLite; now a MALFORMED row."""
    repo = bare_repo()
    doc: dict[str, object] = {"tree": "t", "contract_digest": "c", "verdict": "PASS"}
    if field == "status":
        doc["steps"] = {"a": {"status": "\ud800"}}
    elif field == "step-id":
        doc["steps"] = {"\ud800": {"status": "passed"}}
    else:
        doc[field] = "\ud800"
    oid = commit_files(repo, {"run.json": json.dumps(doc).encode()})  # unsigned
    plan = f"surrogate-{field}"
    repo.references.create(runs_ref(plan), oid, force=True)
    gitdir = Path(repo.path)
    index.sync(repo, gitdir, plan)
    (row,) = index.recent(repo, gitdir, plan, 5)
    assert row.verdict == "MALFORMED"


def test_git_audit_run_survives_an_unsigned_run_with_a_lone_surrogate() -> None:
    world = gate_world()
    doc = ideal_doc(world)
    doc["verdict"] = "\ud800"
    install_run(json.dumps(doc).encode(), signed=False)
    with pytest.raises(LedgerError, match="which no runner signed"):  # one line, no crash
        run_plan(open_repo(world.path), world.plan, gate_signer(), jobs=1)
    with honest_run_on_any_tip():  # and read as runs read such a tip before the tip check
        recorded = run_plan(open_repo(world.path), world.plan, gate_signer(), jobs=1)
    assert recorded.verdict in ("PASS", "FAIL", "UNKNOWN")


# ----------------------------------------------------------------------------- policy


def test_policy_from_json_accepts_only_what_it_can_digest() -> None:
    doc = {"format": POLICY_FORMAT, "protected_refs": ["\ud800"]}
    with pytest.raises(TrustError, match="lone surrogates"):
        Policy.from_json(doc, "policy.json")


def test_gate_survives_an_unsigned_plans_commit_with_a_lone_surrogate_policy() -> None:
    """Was rfc8785.CanonicalizationError: the transition was judged before the signature."""
    world = gate_world()
    git = open_repo(world.path).git
    tip = git.references[PLANS_REF].target
    base = git[tip]
    assert isinstance(base, pygit2.Commit)
    files = read_files(git, base.tree)
    policy = json.loads(files["policy.json"])
    policy["protected_refs"] = ["\ud800"]
    files["policy.json"] = json.dumps(policy).encode()
    who = pygit2.Signature("mallory", "mallory@example.test", 1_700_000_000, 0)
    forged = git.create_commit(None, who, who, "policy", write_tree(git, files), [tip])
    git.references.create(PLANS_REF, forged, force=True)
    try:
        result = judge_gate()
        assert result.verdict == "FAIL"
        assert [r.code for r in result.reasons] == ["plans.untrusted"]
    finally:
        git.references.create(PLANS_REF, tip, force=True)
