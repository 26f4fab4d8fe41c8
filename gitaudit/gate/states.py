"""Step states for mission control, as the gate sees them for the judged tree.

A step is ``verified`` only when the evidence the gate accepted proves it for this tree, in a
run that counts as a whole (not an interrupted one), and it has not expired; ``expired``,
``unknown`` (its last outcome is unknown and it may not simply run again: not idempotent under
the sealed contract, or under one a planner's reseals led from), ``exhausted`` (max_attempts
failures under this contract since a sealer last reset them) and ``failed`` come from the
ledger; anything else is ``pending``. The vocabulary is :mod:`gitaudit.mission`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitaudit.gate.result import Reason
from gitaudit.git.repo import Repo
from gitaudit.ledger import index
from gitaudit.ledger.plansref import PlansState, attempt_contracts, reconcile_first
from gitaudit.ledger.records import RunRecord
from gitaudit.ledger.refs import read_ref, runs_ref
from gitaudit.ledger.resets import held_at
from gitaudit.ledger.tallies import Tallies
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus, Verdict

_STATE_OF = {
    StepStatus.FAILED: "failed",
    StepStatus.EXHAUSTED: "exhausted",
}  # an unknown outcome is ``unknown`` only where it must be reconciled (else ``pending``)


def step_states(
    repo: Repo,
    state: PlansState,
    name: str,
    plan: Plan,
    record: RunRecord | None,
    reasons: Sequence[Reason],
) -> dict[str, str]:
    """Each step's state, consistent with the verdict given with *reasons* for *record*."""
    if any(r.step is None and r.verdict == Verdict.FAIL for r in reasons):
        record = None  # the evidence as a whole was refused: nothing in it counts
    # a pass in a run that does not count as a whole (interrupted) proves nothing, here or
    # carried: `git audit run` does not carry it and the gate composes no PASS from it
    record_counts = record is not None and record.sound
    by_step = {r.step: r for r in reasons if r.step}
    seal = state.seal(name)
    counted = index.tallies(repo.git, repo.gitdir, name)
    held = held_at(repo.git, read_ref(repo.git, runs_ref(name)))
    attempts = (
        counted.failures_since(
            {
                c: state.attempts_reset(name, c, held)
                for c in attempt_contracts(repo.git, state, name)
            }
        )
        if seal
        else {}
    )
    first = reconcile_first(repo.git, state, name) if seal else frozenset()
    unresolved = _open(repo, counted, first)
    states: dict[str, str] = {}
    for step in plan.steps:
        entry = record.steps.get(step.id) if record else None
        reason = by_step.get(step.id)
        if reason is not None and reason.code == "evidence.expired":
            states[step.id] = "expired"
        elif reason is None and entry is not None and entry.proven and record_counts:
            states[step.id] = "verified"
        elif step.id in unresolved:
            states[step.id] = "unknown"
        elif attempts.get(step.id, 0) >= step.max_attempts:
            states[step.id] = "exhausted"
        elif entry is not None and entry.status == StepStatus.EXHAUSTED:
            states[step.id] = "failed"  # exhausted when run, but a sealer reset its attempts
        else:
            states[step.id] = _STATE_OF.get(entry.status, "pending") if entry else "pending"
    return states


def _open(repo: Repo, counted: Tallies, first: frozenset[str]) -> set[str]:
    """The steps whose outcome must be settled before they run again, as `git audit run` takes
    them (:func:`gitaudit.run.recorder.open_outcomes`): unknown or interrupted, or settled by a
    reconciliation made here under a PATH that does not offer its programs (which the run does
    not take as settling). Without a work tree (a server), the unknown and interrupted ones."""
    if repo.workdir is None:
        return {sid for sid in counted.unsettled() if sid in first}
    from gitaudit.run.recorder import open_outcomes  # the run's own rule (and its imports)

    return set(open_outcomes(repo, counted, first))
