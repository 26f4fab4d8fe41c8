"""Trusted runners per ref: whose evidence proves a tree for a given ref.

The policy may name, per ref pattern, the runners whose evidence counts there and how many
distinct ones must agree (:class:`gitaudit.ledger.trust.EvidenceRule`): ``refs/heads/main``
proven by CI's key alone, a release branch by two runners on different machines. Judged for such
a ref, the evidence judge (:func:`gitaudit.gate.evidence.judge_evidence`) judges the plan's steps
from the runs of the admitted runners alone, by the rules any evidence is judged by (a step
carried from another runner's run does not count), and needs at least ``min`` distinct admitted
runners whose *newest* run of the plan for exactly this tree and contract PASSed and is fresh
(each step with ``valid_for`` within it, counted from the run that executed the step, that run
or the one it carried the step from; and, as for ``evidence.future``, not signed further ahead
of this clock than the tolerated skew): a pass a runner recorded before its own newer failure
is not its word on the tree any more. Where ``min`` asks more than one runner, a
runner agrees only with steps it executed itself: a passing run that carried a step from
another runner's run repeats that runner's word, and is no second agreement. Evidence by other
trusted runners still shows, as advisory: it can fail a tree, never prove it for that ref, nor
supply a step's outcome there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gitaudit.gate.compose import Source
from gitaudit.ledger.records import CLOCK_SKEW, RunRecord
from gitaudit.ledger.trust import EvidenceRule, TrustedKey
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus, Verdict


def tally(
    plan: Plan,
    rule: EvidenceRule,
    runs: Sequence[Source],
    now: float,
    own: Callable[[TrustedKey, RunRecord], bool],
    origin: Callable[[str], RunRecord | None] = lambda _commit: None,
) -> tuple[frozenset[str], frozenset[str], float | None, frozenset[str]]:
    """(admitted, advisory, until, borrowed): the trusted runners whose newest run among *runs*
    (every run of the plan for the tree and contract, newest first, each with its signer)
    PASSed and is fresh, split by *rule*; when fewer than ``min`` admitted runners will still
    be fresh (an expiry for whoever remembers the verdict; None: never, or too few already);
    and, when *rule* asks more than one runner, the admitted runners whose passing run is not
    their own word (*own*: every step it carried came from a run of the same runner), which do
    not agree. *origin* reads the run a carried step came from (None: it cannot be read), whose
    start the step's freshness counts from (:func:`word_expires`)."""
    newest: dict[str, tuple[TrustedKey, RunRecord]] = {}
    for source in runs:
        if source.signer is not None:
            newest.setdefault(source.signer.name, (source.signer, source.record))
    admitted: set[str] = set()
    advisory: set[str] = set()
    borrowed: set[str] = set()
    expiries: list[float] = []
    for name, (signer, record) in newest.items():
        expires = word_expires(plan, record, origin)
        if record.verdict != Verdict.PASS or (
            expires is not None and (expires < now or record.time > now + CLOCK_SKEW)
        ):  # expired, or dated ahead and so fresh for too long (as `evidence.future`)
            continue
        if rule.min > 1 and rule.admits(signer) and not own(signer, record):
            borrowed.add(name)
            continue
        (admitted if rule.admits(signer) else advisory).add(name)
        if expires is not None and rule.admits(signer):
            expiries.append(expires)
    expiries.sort(reverse=True)
    until = expiries[rule.min - 1] if 0 < rule.min <= len(expiries) else None
    return frozenset(admitted), frozenset(advisory), until, frozenset(borrowed)


def word_expires(
    plan: Plan, record: RunRecord, origin: Callable[[str], RunRecord | None]
) -> float | None:
    """When *record*'s word on its tree stops being fresh (None: never): the earliest expiry of
    a step with ``valid_for``, counted from when the run that executed it began, *record* itself
    or, for a step it carried, the run it came from (read by *origin*; one that cannot be read
    is expired). A passing run that carried a step holds it no fresher than its execution."""
    expiries: list[float] = []
    for step in plan.steps:
        if step.valid_for is None:
            continue
        entry = record.steps.get(step.id)
        began: int | None = record.began
        if entry is not None and entry.status == StepStatus.CARRIED:
            source = origin(entry.carried_from or "")
            began = None if source is None else min(record.began, source.began)
        expiries.append(float("-inf") if began is None else float(began + step.valid_for))
    return min(expiries) if expiries else None


def describe(
    rule: EvidenceRule,
    ref: str,
    admitted: frozenset[str],
    advisory: frozenset[str],
    borrowed: frozenset[str] = frozenset(),
) -> str:
    who = ", ".join(sorted(rule.runners))
    have = ", ".join(sorted(admitted)) or "none"
    text = (
        f"{ref} takes evidence from {who} ({rule.min} distinct runner"
        f"{'s' if rule.min != 1 else ''}): passing runs for this tree by {have}"
    )
    if borrowed:
        text += (
            f"; the passing runs by {', '.join(sorted(borrowed))} carried steps another runner "
            "executed (no agreement: `git audit run --fresh` there)"
        )
    if advisory:
        text += f"; runs by {', '.join(sorted(advisory))} are advisory here"
    return text
