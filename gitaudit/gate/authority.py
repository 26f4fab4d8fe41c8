"""What a runner's signature does not vouch for: claims that need more authority than running.

A run commit is evidence because a runner signed what its checks observed. Some step entries
claim more than that, and count only when the signer held the authority for the claim:

* a step settled by someone's word (``reconciled.mode`` other than ``readback``: ``git audit
  reconcile --observed``) counts only when the run commit is signed by a **reconciler** or a
  sealer of the current trust set (``evidence.unauthorised-reconcile``);
* a step that passed in a forced run (``git audit run --force``) while its failed attempts under
  the run's contract, on the ledger before that run and since a sealer last reset them
  (:mod:`gitaudit.ledger.resets`), had reached ``max_attempts``: the contract said to stop
  trying, and only a sealer may say otherwise (``evidence.forced-past-exhaustion``).

Each rule is applied to the run judged and to the run a carried step came from.
"""

from __future__ import annotations

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.gate.result import Reason
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import PlansState, attempt_contracts
from gitaudit.ledger.records import RunRecord, StepEntry
from gitaudit.ledger.resets import failures_on_chain
from gitaudit.ledger.trust import TrustSet
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus


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


def forced_past_exhaustion(
    git: pygit2.Repository, state: PlansState, name: str, plan: Plan, record: RunRecord, step: str
) -> Reason | None:
    """A FAIL reason when *step* passed in *record*, a forced run, although its failed attempts
    before that run (under the run's contract, since the last reset) had reached max_attempts.
    The failures are counted on the signed chain below the run, never in the lookup cache."""
    if step not in _executed_passes(record):
        return None
    model = plan.step(step)
    if model is None:  # a step the plan does not have: nothing it allows or forbids
        return None
    before = _failures_before(git, state, name, plan, record)  # every executed pass counted
    if before[step] < model.max_attempts:
        return None
    return Reason(
        "evidence.forced-past-exhaustion",
        f"step {step} passed in run {record.commit[:12]} only because it was forced (--force) "
        f"past its {model.max_attempts} failed attempts",
        "a forced run's evidence counts once a sealer lets the step be tried again: "
        f"`git audit plan reset-attempts {step} --plan {name} --reason ...` (or reseal the plan)",
        step=step,
    )


def _executed_passes(record: RunRecord) -> list[str]:
    """The steps a forced run executed and passed (settled ones are the reconcile rule's)."""
    if not record.forced:
        return []
    return [
        sid
        for sid, entry in record.steps.items()
        if entry.status == StepStatus.PASSED and entry.reconciled is None
    ]


# (repository, run, contract, how many are enough per step) -> counts
_COUNTED: dict[tuple[str, str, str, tuple[tuple[str, int], ...]], dict[str, int]] = {}


def _failures_before(
    git: pygit2.Repository, state: PlansState, name: str, plan: Plan, record: RunRecord
) -> dict[str, int]:
    """Failed attempts before *record* of each step it executed and passed, less those a sealer
    reset: under the run's contract, and when that is the sealed one, also under the contracts
    a planner's reseals led from (:func:`gitaudit.ledger.plansref.attempt_contracts`); counted
    in one walk per contract (far enough to decide each step) and remembered: the chain below a
    commit never changes."""
    seal = state.seal(name)
    contracts = (
        attempt_contracts(git, state, name)
        if seal is not None and seal.contract_digest == record.contract
        else (record.contract,)
    )
    passed = _executed_passes(record)
    resets = [state.attempts_reset(name, contract) for contract in contracts]
    total = {sid: -sum(reset.get(sid, 0) for reset in resets) for sid in passed}
    # enough to decide under each contract: a reset under one may cover failures under another
    enough = {
        sid: model.max_attempts - total[sid]
        for sid in passed
        if (model := plan.step(sid)) is not None
    }
    for contract in contracts:
        key = (str(git.path), record.commit, contract, tuple(sorted(enough.items())))
        if key not in _COUNTED:
            parents = commit_of(git, pygit2.Oid(hex=record.commit), "run").parent_ids
            start = parents[0] if parents else None
            if len(_COUNTED) > 64:
                _COUNTED.clear()
            _COUNTED[key] = failures_on_chain(git, start, name, contract, enough)
        for sid, n in _COUNTED[key].items():
            total[sid] += n
    return total
