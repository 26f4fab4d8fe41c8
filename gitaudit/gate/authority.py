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

``git audit run`` counts failed attempts and unknown outcomes on the clone's own ledger only, so
an unforced run proves nothing about them: made in another clone (one without the audit runs),
its pass comes back as a remote-tracking copy, or signed again on top of the failures by ``git
audit push``. So every executed pass is judged by the same rules, over every copy of the
plan's ledger the judge holds (:class:`Copies`): below the run on its own chain, and on a copy
whose chain does not hold the run, as that copy stands (which of the two came first, their
clocks cannot say: the agent's runner signs the time):

* failed attempts that had reached ``max_attempts`` (``evidence.forced-past-exhaustion`` for a
  forced run, ``evidence.past-exhaustion`` otherwise);
* for a step that must be reconciled before it runs again
  (:func:`gitaudit.ledger.plansref.reconcile_first`), an unknown or interrupted outcome not
  settled (``evidence.unreconciled``).

Each rule is applied to the run judged and to the run a carried step came from. A pass
settled by reconciliation (``git audit reconcile``) is judged by the same two rules: it is the
outcome of the execution it settles, so that execution must have been allowed (a timed-out
execution forced past ``max_attempts``, or made in another clone over an unknown outcome, then
settled by its readback checks, was a pass of a step the contract closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.frozen import frozen
from gitaudit.gate.result import Reason
from gitaudit.ledger import chain
from gitaudit.ledger.objects import blob_at, commit_of, loads
from gitaudit.ledger.plansref import PlansState, attempt_contracts, reconcile_first
from gitaudit.ledger.records import RunRecord, StepEntry, lookup_keys
from gitaudit.ledger.refs import ledger_ref, read_ref
from gitaudit.ledger.resets import ALL, failures_on_chain, held_at
from gitaudit.ledger.tallies import EXECUTED, UNSETTLED, Tallies
from gitaudit.ledger.trust import TrustSet
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus


@frozen
class Copies:
    """The copies of the plan's ledger the judge holds: (ledger key, tip) each, the plan's own
    first; and their tallies (:mod:`gitaudit.ledger.tallies`) by ledger key, None where the
    lookup cache does not have them (a pushed tip, a copy it cannot read)."""

    held: tuple[tuple[str, pygit2.Oid | None], ...]
    tallies: Callable[[str], Tallies | None]
    # a pushed chain (pre-receive): the tip of the ledger it extends and that tip's tallies, so
    # that what lies below a pushed run is counted as the runs pushed plus what the ledger held
    # (a walk of the whole ledger for every push cost seconds at 100,000 runs); None otherwise
    base: Callable[[], tuple[pygit2.Oid, Tallies] | None] = lambda: None
    # (ledger key, its tip, run) -> whether the tip holds the run, as far as known: filled in here,
    # shared by every step the judge asks about (the walk of a chain to a run deep in it costs
    # about 4 ms per 1,000 runs)
    known: dict[tuple[str, str, str], bool] = field(default_factory=dict)

    def holding(self, git: pygit2.Repository, commit: str) -> list[str]:
        """The keys of the copies whose chain holds the run *commit* (at their tip or below
        it)."""
        run = pygit2.Oid(hex=commit)
        keys = []
        for key, tip in self.held:
            if tip is None:
                continue
            known = (key, str(tip), commit)
            held = self.known.get(known)
            if held is None:
                held = self.known[known] = tip == run or git.descendant_of(tip, run)
            if held:
                keys.append(key)
        return keys


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


def past_exhaustion(
    git: pygit2.Repository,
    state: PlansState,
    name: str,
    plan: Plan,
    record: RunRecord,
    step: str,
    copies: Copies,
) -> Reason | None:
    """A FAIL reason when *step* passed in *record* although its failed attempts (under the
    run's contract, since the last reset) had reached max_attempts: before that run on its own
    chain (counted on the signed chain, never in the lookup cache; the tallies of a copy
    holding it, counted up to its tip, only say when no walk is needed), or on a copy of the
    ledger that does not hold the run."""
    if not _judged_pass(record, step):
        return None
    model = plan.step(step)
    if model is None:  # a step the plan does not have: nothing it allows or forbids
        return None
    parents = commit_of(git, pygit2.Oid(hex=record.commit), "run").parent_ids
    holding = copies.holding(git, record.commit)
    others = [key for key, _tip in copies.held if key not in holding]
    if not parents and not others:  # the first run of the only chain: nothing failed before
        return None
    contracts = _contracts(git, state, name, record)
    tips = dict(copies.held)

    def resets(at: pygit2.Oid | str | None) -> dict[str, dict[str, int]]:
        """The resets that count on the chain up to *at* (:func:`held_at`)."""
        held = held_at(git, at)
        return {contract: state.attempts_reset(name, contract, held) for contract in contracts}

    def reached(key: str) -> bool | None:
        counted = copies.tallies(key)
        if counted is None:
            return None
        tip = tips.get(key) or read_ref(git, ledger_ref(key))  # what its tallies counted to
        return counted.failures_since(resets(tip)).get(step, 0) >= model.max_attempts

    # a copy holding the run with fewer failures up to its tip has fewer below the run
    if parents and not any(reached(key) is False for key in holding):
        before = _pushed_below(git, name, step, parents[0], resets(record.commit), copies)
        if before is None:
            before = _failures_before(git, state, name, plan, record)[step]  # every pass counted
        if before >= model.max_attempts:
            return _exhausted(name, model.max_attempts, record, step, None)
    for key in others:
        if reached(key):
            return _exhausted(name, model.max_attempts, record, step, key)
    return None


def _pushed_below(
    git: pygit2.Repository,
    name: str,
    step: str,
    start: pygit2.Oid,
    resets: Mapping[str, Mapping[str, int]],
    copies: Copies,
) -> int | None:
    """*step*'s failed attempts (under *resets*' contracts, less the resets) on the chain from
    *start* down, for a pushed run: those of the runs pushed, walked down to the tip the push
    extends, plus that tip's tallies; None when nothing is pushed or the chain does not extend
    that tip (then the whole chain is walked)."""
    base = copies.base()
    if base is None:
        return None
    tip, counted = base
    if start != tip and not git.descendant_of(start, tip):
        return None
    total = 0
    for contract, reset in resets.items():
        total += counted.failed.get((contract, step), 0) - reset.get(step, 0)
        if start != tip:
            total += failures_on_chain(git, start, name, contract, {step: ALL}, stop=tip)[step]
    return total


def _exhausted(name: str, most: int, record: RunRecord, step: str, elsewhere: str | None) -> Reason:
    fix = (
        "evidence of a step past its failed attempts counts once a sealer lets the step be tried "
        f"again: `git audit plan reset-attempts {step} --plan {name} --reason ...` (or reseal "
        "the plan)"
    )
    where = f"on {ledger_ref(elsewhere)}" if elsewhere else "below it on its ledger"
    if _settled_pass(record, step):
        return Reason(
            "evidence.past-exhaustion",
            f"step {step} was settled as passed in run {record.commit[:12]}, but its {most} "
            f"failed attempts {where} had exhausted it: the execution it settles was made past "
            "them (forced, or where they were not counted)",
            fix,
            step=step,
        )
    if record.forced and elsewhere is None:
        return Reason(
            "evidence.forced-past-exhaustion",
            f"step {step} passed in run {record.commit[:12]} only because it was forced "
            f"(--force) past its {most} failed attempts",
            "a forced run's evidence counts once a sealer lets the step be tried again: "
            f"`git audit plan reset-attempts {step} --plan {name} --reason ...` "
            "(or reseal the plan)",
            step=step,
        )
    return Reason(
        "evidence.past-exhaustion",
        f"step {step} passed in run {record.commit[:12]}, but its {most} failed attempts "
        f"{where} had exhausted it: the run was made where they were not counted",
        fix,
        step=step,
    )


def unreconciled(
    git: pygit2.Repository,
    state: PlansState,
    name: str,
    record: RunRecord,
    step: str,
    copies: Copies,
) -> Reason | None:
    """A FAIL reason when *step*, one to reconcile before it runs again, passed in *record*
    although an earlier outcome of it was unknown and not settled: its newest execution below
    the run on its own chain, or the newest on a copy of the ledger that does not hold the
    run. A pass settled by reconciliation is judged at the execution it settles (the newest
    below it that ran the step), which must have been made with no earlier outcome unsettled."""
    if _executed_pass(record, step):
        at = record.commit
    elif _settled_pass(record, step):
        parents = commit_of(git, pygit2.Oid(hex=record.commit), "run").parent_ids
        settled = _settled_execution(git, parents[0] if parents else None, name, step)
        if settled is None:  # nothing below it ran the step: nothing it was allowed to settle
            return None
        at = settled
    else:
        return None
    found: Reason | None = None
    parents = commit_of(git, pygit2.Oid(hex=at), "run").parent_ids
    newest = _newest_execution(git, parents[0] if parents else None, name, step)
    if newest is not None and newest[0] in UNSETTLED:
        found = _unsettled(name, record, step, newest[1], None, at)
    holding = copies.holding(git, at) if found is None else []
    for key, _tip in copies.held if found is None else ():
        counted = copies.tallies(key) if key not in holding else None
        if counted is not None and step in counted.unsettled():
            found = _unsettled(name, record, step, counted.unsettled()[step], key, at)
            break
    # asked last: which steps must be reconciled first reads the sealed contracts
    return found if found is not None and step in _settle_first(git, state, name) else None


def _unsettled(
    name: str, record: RunRecord, step: str, run: str, elsewhere: str | None, at: str
) -> Reason:
    where = f"on {ledger_ref(elsewhere)}" if elsewhere else "before it on its ledger"
    what = f"step {step} passed in run {record.commit[:12]}, but"
    if at != record.commit:
        what = (
            f"step {step} was settled as passed in run {record.commit[:12]}, but the execution "
            f"it settles (run {at[:12]}) came after"
        )
    return Reason(
        "evidence.unreconciled",
        f"{what} its outcome in run {run[:12]} {where} is unknown and was never reconciled: it "
        "ran again without one",
        f"settle what that run did first: `git audit reconcile {step} --plan {name} --observed "
        "pass|fail` (or `--readback`), then run it again",
        step=step,
    )


# (repository, plans tip, plan) -> the steps to reconcile before they run again
_SETTLE_FIRST: dict[tuple[str, str, str], frozenset[str]] = {}


def _settle_first(git: pygit2.Repository, state: PlansState, name: str) -> frozenset[str]:
    key = (str(git.path), str(state.tip), name)
    if key not in _SETTLE_FIRST:
        if len(_SETTLE_FIRST) > 64:
            _SETTLE_FIRST.clear()
        _SETTLE_FIRST[key] = reconcile_first(git, state, name) if state.seal(name) else frozenset()
    return _SETTLE_FIRST[key]


def _newest_execution(
    git: pygit2.Repository, start: pygit2.Oid | None, name: str, step: str
) -> tuple[str, str] | None:
    """(status, run) of *step*'s newest execution on the chain from *start* down, read as the
    lookup cache reads it (:data:`gitaudit.ledger.tallies.EXECUTED`); None: it never ran."""
    for commit in chain.walk(git, start, what=f"refs/audit/runs/{name}"):
        try:
            keys = lookup_keys(loads(blob_at(git, commit.tree, "run.json") or b"{}"))
        except ValueError:
            keys = None
        status = keys[3].get(step, ("",))[0] if keys is not None else ""
        if status in EXECUTED:
            return status, str(commit.id)
    return None


def _settled_execution(
    git: pygit2.Repository, start: pygit2.Oid | None, name: str, step: str
) -> str | None:
    """The run, on the chain from *start* down, of the execution of *step* a reconciliation
    above it settles: the newest that ran it (an attempt or checks), past the runs that only
    reported its outcome still unknown and earlier reconciliations (an inconclusive readback);
    None when it is not unsettled."""
    for commit in chain.walk(git, start, what=f"refs/audit/runs/{name}"):
        try:
            doc = loads(blob_at(git, commit.tree, "run.json") or b"{}")
        except ValueError:
            return None
        steps = doc.get("steps") if isinstance(doc, dict) else None
        entry = steps.get(step) if isinstance(steps, dict) else None
        if (
            isinstance(entry, dict)
            and entry.get("reconciled") is None
            and (entry.get("attempt") is not None or entry.get("checks"))
        ):
            return str(commit.id) if entry.get("status") in UNSETTLED else None
    return None


def _judged_passes(record: RunRecord) -> list[str]:
    """The steps a run passed by executing them or by settling an execution of them."""
    return [sid for sid in record.steps if _judged_pass(record, sid)]


def _judged_pass(record: RunRecord, step: str) -> bool:
    return _executed_pass(record, step) or _settled_pass(record, step)


def _settled_pass(record: RunRecord, step: str) -> bool:
    """Whether *record* settled an unknown outcome of *step* as passed (``git audit
    reconcile``): the outcome of an earlier execution, judged as that execution."""
    entry = record.steps.get(step)
    return entry is not None and entry.status == StepStatus.PASSED and entry.reconciled is not None


def _executed_pass(record: RunRecord, step: str) -> bool:
    """Whether *record* executed *step* and it passed (asked for each step the run proves: a
    list of them all each time cost a plan of 100 steps 4 ms)."""
    entry = record.steps.get(step)
    return entry is not None and entry.status == StepStatus.PASSED and entry.reconciled is None


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
    contracts = _contracts(git, state, name, record)
    passed = _judged_passes(record)
    held = held_at(git, record.commit)  # a reset counts below a run recorded after it
    resets = [state.attempts_reset(name, contract, held) for contract in contracts]
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


def _contracts(
    git: pygit2.Repository, state: PlansState, name: str, record: RunRecord
) -> tuple[str, ...]:
    """The contracts whose failed attempts count against *record*'s: its own and, when that is
    the sealed one, those a planner's reseals led from."""
    seal = state.seal(name)
    if seal is not None and seal.contract_digest == record.contract:
        return attempt_contracts(git, state, name)
    return (record.contract,)
