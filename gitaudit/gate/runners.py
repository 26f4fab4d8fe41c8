"""Trusted runners per ref: whose evidence proves a tree for a given ref.

The policy may name, per ref pattern, the runners whose evidence counts there and how many
distinct ones must agree (:class:`gitaudit.ledger.trust.EvidenceRule`): ``refs/heads/main``
proven by CI's key alone, a release branch by two runners on different machines. Judged for such
a ref, the gate needs at least ``min`` distinct admitted runners, each with a run of the plan
that PASSed for exactly this tree and contract (and is not older than the plan's shortest
``valid_for``). Evidence by other trusted runners still shows, as advisory: it can fail a tree,
never prove it for that ref.
"""

from __future__ import annotations

from collections.abc import Sequence

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.git.repo import Repo
from gitaudit.ledger import lookup
from gitaudit.ledger.plansref import PlansState
from gitaudit.ledger.trust import EvidenceRule
from gitaudit.plan.model import Plan
from gitaudit.verdict import Verdict


def runners_for(
    repo: Repo,
    state: PlansState,
    name: str,
    plan: Plan,
    tree: str,
    rule: EvidenceRule,
    ledgers: Sequence[tuple[str, pygit2.Oid]],
    now: float,
) -> tuple[frozenset[str], frozenset[str]]:
    """(admitted, advisory): the trusted runners with a fresh passing run of *name* for *tree*
    under its sealed contract on *ledgers* (lookup key, tip), split by *rule*."""
    seal = state.seal(name)
    assert seal is not None
    runners = state.trust.with_role("runner")
    lifetimes = [s.valid_for for s in plan.steps if s.valid_for is not None]
    oldest = now - min(lifetimes) if lifetimes else None
    admitted: set[str] = set()
    advisory: set[str] = set()
    for key, tip in ledgers:
        try:
            records = lookup.every_run(repo.git, repo.gitdir, key, tree, seal.contract_digest, tip)
        except GitAuditError:
            continue  # the ledger's own problems are the evidence judge's to report
        for record in records:
            if record.verdict != Verdict.PASS or (oldest is not None and record.time < oldest):
                continue
            try:
                signer = state.trust.find(verify_commit(repo.git, record.commit, runners))
            except GitAuditError:
                continue
            if signer is not None:
                (admitted if rule.admits(signer) else advisory).add(signer.name)
    return frozenset(admitted), frozenset(advisory - admitted)


def describe(
    rule: EvidenceRule, ref: str, admitted: frozenset[str], advisory: frozenset[str]
) -> str:
    who = ", ".join(sorted(rule.runners))
    have = ", ".join(sorted(admitted)) or "none"
    text = (
        f"{ref} takes evidence from {who} ({rule.min} distinct runner"
        f"{'s' if rule.min != 1 else ''}): passing runs for this tree by {have}"
    )
    if advisory:
        text += f"; runs by {', '.join(sorted(advisory))} are advisory here"
    return text
