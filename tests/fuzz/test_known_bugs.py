"""Minimal reproducers of the crashes fuzzing found that are still open, one per registered bug.

Each is ``xfail(strict=True, raises=<the exception>)``: it fails today for exactly that reason,
and the day the bug is fixed it XPASSes, which strict mode reports as a failure, so the marker and
the entry in :mod:`tests.fuzz.known_bugs` get removed together (and the test moves to
``test_fuzz_regressions.py``). Each reproducer also checks that the registry recognises its
exception, so the fuzz tests and harnesses tolerate exactly these.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest
import rfc8785

from gitaudit.ledger import index
from gitaudit.ledger.objects import read_files, write_tree
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.trust import POLICY_FORMAT, Policy
from gitaudit.record import run_plan
from gitaudit.repo import open_repo
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

INDEX_BUG = (
    "BUG: gitaudit/ledger/index.py:132-133 sync: index._summary (index.py:75) passes strings of "
    "run.json through str(), and one holding a lone surrogate (the JSON escape \\ud800 in "
    "verdict, tree, contract_digest, a step id, status or input_digest) cannot be bound as "
    "SQLite text: UnicodeEncodeError. The index reads every run commit before any signature "
    "is checked, so one UNSIGNED commit on refs/audit/runs/<plan> (e.g. fetched) breaks "
    "`git audit run`, `log` and every other index user with a traceback (the gate survives "
    "since 0c578f7 only through its catch-all: evidence.malformed). Fix: reject lone "
    "surrogates in ledger.objects.loads (as plan/load.py parse_json does), so _summary's "
    "ValueError handler turns the commit into a MALFORMED row"
)


@pytest.mark.xfail(strict=True, raises=UnicodeEncodeError, reason=INDEX_BUG)
@pytest.mark.parametrize("field", ["verdict", "tree", "status", "step-id"])
def test_index_sync_survives_a_lone_surrogate_in_run_json(field: str) -> None:
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
    reproduce("index-surrogate-field", lambda: index.sync(repo, gitdir, plan))


@pytest.mark.xfail(strict=True, raises=UnicodeEncodeError, reason=INDEX_BUG)
def test_git_audit_run_survives_an_unsigned_run_with_a_lone_surrogate() -> None:
    world = gate_world()
    doc = ideal_doc(world)
    doc["verdict"] = "\ud800"
    install_run(json.dumps(doc).encode(), signed=False)
    handle = open_repo(world.path)
    reproduce("index-surrogate-field", lambda: run_plan(handle, world.plan, gate_signer(), jobs=1))


# ----------------------------------------------------------------------------- policy

POLICY_BUG = (
    "BUG: gitaudit/ledger/trust.py:190 Policy.from_json accepts protected_refs holding a lone "
    "surrogate, and Policy.digest() (trust.py:171 -> plan/digest.py:96 canonical) then raises "
    "rfc8785.CanonicalizationError. verify_chain (plansref.py:216) evaluates the transition "
    "rules (transition_problem, plansref.py:381, which calls after.policy.digest()) BEFORE the "
    "commit's signature, so one UNSIGNED commit on refs/audit/plans crashes the gate, status, "
    "run and seal instead of a TrustError. Fix: reject lone surrogates in ledger.objects.loads "
    "(or in Policy.from_json), and verify each commit's signature before judging its contents"
)


@pytest.mark.xfail(strict=True, raises=rfc8785.CanonicalizationError, reason=POLICY_BUG)
def test_policy_from_json_accepts_only_what_it_can_digest() -> None:
    doc = {"format": POLICY_FORMAT, "protected_refs": ["\ud800"]}
    reproduce("policy-not-canonical", lambda: Policy.from_json(doc, "policy.json").digest())


@pytest.mark.xfail(strict=True, raises=rfc8785.CanonicalizationError, reason=POLICY_BUG)
def test_gate_survives_an_unsigned_plans_commit_with_a_lone_surrogate_policy() -> None:
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
        reproduce("policy-not-canonical", judge_gate)
    finally:
        git.references.create(PLANS_REF, tip, force=True)
