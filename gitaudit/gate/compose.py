"""Evidence composed from several runs of one tree: which run's entry proves each step.

Usually the newest run of a plan for the judged tree (under the current contract) decides every
step by itself. Two cases need more than one run:

* **Partial runs.** ``git audit run --step ID`` on one machine and the rest on another leave
  the newest run with steps it did not decide (``not-run``, or ``blocked`` only because a
  prerequisite was not verified in that run). For such a step an older run of the *same tree
  and contract* decides, on any ledger the gate reads (the plan's own and the remote-tracking
  copies of other clones' ledgers).
* **Runner labels.** A step with ``runs_on`` needs, for each label, an outcome that a runner
  carrying that label executed itself, or found blocked by a broken upstream output (a carried
  entry is another run's word, so it never counts for a label). A runner's labels are the ones
  the trust set gives its key (``git audit trust add --label``), narrowed to those the run
  declared (``git audit run --label``).

The rule is the same in both cases: for each step (and label) the **newest decisive outcome**
counts, so a FAIL is never hidden by an older PASS; an undecided entry never counts as an
outcome. Candidates are read from the signed chains themselves, not from the lookup cache.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Iterable, Sequence

from gitaudit.frozen import frozen
from gitaudit.ledger.records import RunRecord, StepEntry
from gitaudit.ledger.trust import TrustedKey
from gitaudit.plan.model import Plan, Step
from gitaudit.verdict import StepStatus, output_broken

# outcomes that decide a step: what was executed (or reconciled), and evidence carried forward
EXECUTED = frozenset(
    {
        StepStatus.PASSED,
        StepStatus.FAILED,
        StepStatus.EXHAUSTED,
        StepStatus.UNKNOWN,
        StepStatus.INTERRUPTED,
    }
)
DECISIVE = EXECUTED | {StepStatus.CARRIED}


@frozen
class Source:
    """A run that may prove steps: its record, the ledger it was read from (a plan name or the
    ref of a remote-tracking copy), the labels its signer holds for it, and its signer as the
    trust set names it (what a ref's evidence rule admits or not)."""

    record: RunRecord
    ledger: str
    labels: frozenset[str] = frozenset()
    signer: TrustedKey | None = None


@frozen
class Proof:
    """What proves one step (for one runner label, when the step has ``runs_on``): the run and
    its entry, or None when no run decided it."""

    step: str
    label: str | None
    source: Source | None
    entry: StepEntry | None


def decisive(entry: StepEntry | None) -> bool:
    """Whether an entry is an outcome of the step: executed, reconciled or carried, or blocked
    because an upstream output it relies on broke (that is a failure, not a missing run)."""
    if entry is None:
        return False
    if entry.status in DECISIVE:
        return True
    return entry.status == StepStatus.BLOCKED and any(
        output_broken(u.passed, (c.outcome for c in u.checks)) for u in entry.upstream
    )


def needs_more_runs(plan: Plan, newest: RunRecord) -> bool:
    """Whether the newest run alone cannot decide the plan: a step with runner labels, or a step
    the newest run left undecided (a run with no entry at all for a step is incomplete, which
    no older run mends)."""
    return any(
        s.runs_on or (s.id in newest.steps and not decisive(newest.steps[s.id])) for s in plan.steps
    )


def effective_labels(declared: Iterable[str], held: frozenset[str]) -> frozenset[str]:
    """The labels a run counts for: those its signer holds, narrowed to the ones it declared."""
    declared = frozenset(declared)
    return held & declared if declared else held


def same_run(record: RunRecord) -> tuple[int, str]:
    """What a run is, whichever commit carries it: its signed time and its record. ``git audit
    push`` signs a local run again on top of the remote's ledger, keeping both, so the commit it
    replaced (in the reflog, or on another remote's copy) is the same run, not another one."""
    text = json.dumps(record.doc, sort_keys=True, separators=(",", ":"), default=str)
    return record.time, hashlib.sha256(text.encode()).hexdigest()


def newest_first(ledgers: Sequence[Sequence[Source]]) -> list[Source]:
    """One newest-first order over several ledgers' runs (each list newest first, in its chain's
    order): a run recorded after another on a ledger's chain comes first whatever the clocks say
    (runners' clocks differ, and a slow one is never refused, so a FAIL recorded after a PASS can
    be signed earlier); otherwise by signed time, the first ledger first for equal times. A run
    found on two ledgers (the same commit, or a copy a push signed again) counts once, where it
    was first found, and is ordered by both chains."""
    first: dict[tuple[int, str], tuple[int, int, int, Source]] = {}
    older: dict[tuple[int, str], list[tuple[int, str]]] = {}  # the runs recorded right before
    waiting: dict[tuple[int, str], int] = {}  # how many runs recorded after it are not placed
    for rank, runs in enumerate(ledgers):
        previous: tuple[int, str] | None = None
        for position, source in enumerate(runs):
            run = same_run(source.record)
            if run not in first:
                first[run] = (-source.record.time, rank, position, source)
                older[run], waiting[run] = [], 0
            if previous is not None and previous != run and run not in older[previous]:
                older[previous].append(run)
                waiting[run] += 1
            previous = run
    ready = [(*first[r][:3], r) for r, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    out: list[Source] = []
    placed: set[tuple[int, str]] = set()
    while ready:
        run = heapq.heappop(ready)[3]
        out.append(first[run][3])
        placed.add(run)
        for below in older[run]:
            waiting[below] -= 1
            if waiting[below] == 0:
                heapq.heappush(ready, (*first[below][:3], below))
    if len(out) < len(first):  # chains that disagree (not git's): by signed time, as a last resort
        rest = sorted((*f[:3], r) for r, f in first.items() if r not in placed)
        out += [first[r][3] for *_key, r in rest]
    return out


def prove(plan: Plan, sources: Sequence[Source]) -> dict[str, tuple[Proof, ...]]:
    """For each step of *plan*: what proves it, from *sources* (newest first; the first is the
    newest run for the tree). A step without labels: the newest decisive entry, else the newest
    run's own entry. A step with ``runs_on``: per label, the newest entry that a runner with the
    label executed (or found blocked by a broken upstream output)."""
    out: dict[str, tuple[Proof, ...]] = {}
    for step in plan.steps:
        out[step.id] = _labelled(step, sources) if step.runs_on else (_plain(step, sources),)
    return out


def _plain(step: Step, sources: Sequence[Source]) -> Proof:
    for source in sources:
        entry = source.record.steps.get(step.id)
        if entry is None:  # a record without the step is incomplete: it decides nothing later
            return Proof(step.id, None, source, None)
        if decisive(entry):
            return Proof(step.id, None, source, entry)
    newest = sources[0] if sources else None
    entry = newest.record.steps.get(step.id) if newest is not None else None
    return Proof(step.id, None, newest if entry is not None else None, entry)


def _labelled(step: Step, sources: Sequence[Source]) -> tuple[Proof, ...]:
    proofs = []
    for label in step.runs_on:
        found = Proof(step.id, label, None, None)
        for source in sources:
            entry = source.record.steps.get(step.id)
            if label in source.labels and entry is not None and _outcome_for_label(entry):
                found = Proof(step.id, label, source, entry)
                break
        proofs.append(found)
    return tuple(proofs)


def _outcome_for_label(entry: StepEntry) -> bool:
    """Whether a labelled runner's entry is its outcome of the step: executed, or blocked because
    an upstream output broke right before it ran there (a failure, as for a step without labels;
    a carried entry is another run's word)."""
    return entry.status in EXECUTED or (entry.status == StepStatus.BLOCKED and decisive(entry))
