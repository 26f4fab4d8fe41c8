"""What a runner's signature does not vouch for: claims that need more authority than running.

A run commit is evidence because a runner signed what its checks observed. Some step entries
claim more than that, and count only when the signer held the authority for the claim:

* a step settled by someone's word (``reconciled.mode`` other than ``readback``: ``git audit
  reconcile --observed``) counts only when the run commit is signed by a **reconciler** or a
  sealer of the current trust set (``evidence.unauthorised-reconcile``).

Each rule is applied to the run judged and to the run a carried step came from.
"""

from __future__ import annotations

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.gate.result import Reason
from gitaudit.ledger.records import RunRecord, StepEntry
from gitaudit.ledger.trust import TrustSet


def unauthorised_reconcile(
    git: pygit2.Repository, trust: TrustSet, plan: str, record: RunRecord, step: str
) -> Reason | None:
    """A FAIL reason when *step* of *record* was settled by observation and the run is not
    signed by a reconciler or a sealer."""
    entry: StepEntry | None = record.steps.get(step)
    if entry is None or entry.reconciled is None:
        return None
    mode = entry.reconciled.get("mode")
    if mode == "readback":  # the step's readback checks ran: evidence like any other
        return None
    try:
        verify_commit(git, pygit2.Oid(hex=record.commit), trust.with_role("reconciler"))
    except GitAuditError:
        return Reason(
            "evidence.unauthorised-reconcile",
            f"step {step} was settled as observed {mode!r} in run {record.commit[:12]}, signed "
            "by a key that is neither a reconciler nor a sealer",
            "only a reconciler or a sealer may settle an outcome by its word: have one check "
            f"the step's effect, or run it again (`git audit run {step} --plan {plan}`)",
            step=step,
        )
    return None
