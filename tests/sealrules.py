"""Plans commits that break one rule of the seal chain each, signed by the real sealer.

`git audit plan seal` never writes them; a sealer key holder (or a tool with a bug) can, by hand.
Every plans commit is judged against its parent by the same rules wherever the chain is read
(``read_state`` on a client, ``pre-receive`` on a server). Each transition here breaks exactly
one rule and is otherwise consistent, so removing that one rule makes the commit acceptable:
the tests built on these fail when a rule is dropped.

Use in two steps: :func:`prepare` makes the legitimate history the transition starts from (a
policy that forbids weakening, a second seal version), which a server test pushes first; then
:func:`forge` writes the offending commit on top and moves the local plans ref to it.
"""

from __future__ import annotations

import json
from typing import Any

import pygit2

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Signer
from gitaudit.git.repo import Repo
from gitaudit.ledger.objects import dumps, write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.seals import seal_plan, set_policy
from gitaudit.ledger.trust import ROLES_PATH, Policy
from gitaudit.plan.catalog import check_worktree

PLAN = "default"
PLAN_FILE = f"plans/{PLAN}.json"
SEAL_FILE = f"seals/{PLAN}.json"

# each transition, and the words of the rule that refuses it
TRANSITIONS = {
    "weakening not recorded": "weakens the contract without recording it",
    "weakening the policy forbids": "weakens the contract; policy forbids it",
    "seal version lowered": f"moves the seal of {PLAN!r} back from v2 to v1",
    "seal record deleted": f"deletes the seal record of plan {PLAN!r}",
    "locked policy relaxed": "relaxes a policy that forbids weakening",
    "last sealer removed": "leaves no sealer trusted",
}


def _plan_in_worktree(repo: Repo) -> dict[str, Any]:
    path = repo.require_workdir() / ".gitaudit" / "plans" / f"{PLAN}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _write_plan(repo: Repo, data: dict[str, Any]) -> None:
    path = repo.require_workdir() / ".gitaudit" / "plans" / f"{PLAN}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")


def _weaken(repo: Repo) -> dict[str, Any]:
    """Lower the first must requirement of the plan in the work tree to should (a weakening)."""
    data = _plan_in_worktree(repo)
    must: dict[str, Any] = next(
        r for r in data["requirements"] if r.get("priority", "must") == "must"
    )
    must["priority"] = "should"
    _write_plan(repo, data)
    return must


def prepare(repo: Repo, sealer: Signer, transition: str) -> dict[str, bytes]:
    """The legitimate commits *transition* starts from (plan *PLAN* already sealed as v1);
    returns the plans files of v1."""
    assert transition in TRANSITIONS, transition
    v1 = dict(read_state(repo).files)
    if transition in ("weakening the policy forbids", "locked policy relaxed"):
        set_policy(repo, sealer, Policy(allow_weaken=False), allow_weaken=False, reason=None)
    if transition == "seal version lowered":  # a weaker v2, recorded: going back strengthens
        _weaken(repo)
        (checked,) = check_worktree(repo.require_workdir(), PLAN)
        seal_plan(repo, sealer, checked, allow_weaken=True, reason="a weaker v2")
    return v1


def forge(repo: Repo, sealer: Signer, transition: str, v1: dict[str, bytes]) -> pygit2.Oid:
    """The offending plans commit, signed by *sealer*, on the current tip; the ref moved to it."""
    base = read_state(repo, remember=False)
    record = base.seal(PLAN)
    assert record is not None and base.tip is not None
    files = dict(base.files)
    if transition in ("weakening not recorded", "weakening the policy forbids"):
        must = _weaken(repo)
        (checked,) = check_worktree(repo.require_workdir(), PLAN)
        recorded = transition == "weakening the policy forbids"
        files[PLAN_FILE] = checked.file.data
        files[SEAL_FILE] = dumps(
            {
                **record.to_json(),
                "version": record.version + 1,
                "contract_digest": checked.digest,
                "previous_digest": record.contract_digest,
                "change": "weakened" if recorded else "neutral",
                "weakened": recorded,
                "weakenings": [f"requirement {must['id']}: must -> should"] if recorded else [],
                "reason": "hand-made",
            }
        )
    elif transition == "seal version lowered":  # v1 again: no weakening, only the version
        files[PLAN_FILE], files[SEAL_FILE] = v1[PLAN_FILE], v1[SEAL_FILE]
    elif transition == "seal record deleted":
        del files[PLAN_FILE], files[SEAL_FILE]
    elif transition == "last sealer removed":  # every key kept, none of them a sealer any more
        roles = json.loads(files[ROLES_PATH])
        roles["sealers"] = []
        files[ROLES_PATH] = dumps(roles)
    else:  # the policy relaxed, the seal record carried over to it: consistent otherwise
        lax = Policy(allow_weaken=True)
        files["policy.json"] = dumps(lax.to_json())
        files[SEAL_FILE] = dumps({**record.to_json(), "policy_digest": lax.digest()})
    git = repo.git
    tree = write_tree(git, files)
    oid: pygit2.Oid = create_signed_commit(
        git, tree=tree, parents=[base.tip], message=f"plans: {transition}\n", signer=sealer
    )
    git.references.create(PLANS_REF, oid, force=True)
    return oid
