"""The verified frontier and progress: which steps may start now, why the others wait
(:class:`Frontier`), the naive completion ratio and the display states of
``plan graph --status``.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitaudit.frozen import frozen
from gitaudit.mission.states import EXHAUSTED, EXPIRED, FAILED, UNKNOWN, VERIFIED, _state_of
from gitaudit.plan.graph import topological_order
from gitaudit.plan.model import Plan, Step, StepId


@frozen
class ClauseNeed:
    """Why one clause of a blocked step is unsatisfied.

    ``index`` is the clause's 1-based position in ``depends_on``; ``alternatives`` pairs each
    alternative with its (normalised) state, in the order the plan lists them.
    """

    index: int
    alternatives: tuple[tuple[StepId, str], ...]

    def __str__(self) -> str:
        named = [f"{sid}={state}" for sid, state in self.alternatives]
        if len(named) == 1:
            return f"clause {self.index} needs {named[0]}"
        return f"clause {self.index} needs one of [{', '.join(named)}]"


@frozen
class BlockedStep:
    """A non-verified step that cannot start: ``needs`` lists each unsatisfied clause."""

    step: StepId
    state: str
    needs: tuple[ClauseNeed, ...]

    def __str__(self) -> str:
        return f"{self.step}: " + "; ".join(str(n) for n in self.needs)


@frozen
class ReadyStep:
    """A step whose every clause is satisfied. ``retry`` is true when its last attempt failed."""

    step: StepId
    state: str
    retry: bool


@frozen
class Frontier:
    """The verified frontier and a classification of every other non-verified step.

    Every plan step is in exactly one of ``verified``, ``ready``, ``retryable``, ``blocked``,
    ``needs_reconcile`` and ``exhausted``. ``failed`` and ``expired`` are overlays: they list
    every step in that state, wherever it is classified. All tuples follow topological order.

    * ``ready``: the verified frontier proper: ``pending`` or ``expired`` steps whose every
      clause is satisfied (a step without clauses is ready unless verified).
    * ``retryable``: ``failed`` steps (attempts remain) whose every clause is satisfied. They are
      kept out of ``ready`` so that a retry is a deliberate decision rather than something a
      scheduler picks up; ``startable`` merges both, flagging retries.
    * ``blocked``: ``pending``, ``expired`` or ``failed`` steps with at least one unsatisfied
      clause, each with its explanation.
    * ``needs_reconcile``: ``unknown`` steps: their outcome must be observed before anything is
      re-run, whatever their clauses say.
    * ``exhausted``: steps that failed with no attempts left.
    """

    ready: tuple[StepId, ...]
    retryable: tuple[StepId, ...]
    startable: tuple[ReadyStep, ...]
    blocked: tuple[BlockedStep, ...]
    needs_reconcile: tuple[StepId, ...]
    exhausted: tuple[StepId, ...]
    failed: tuple[StepId, ...]
    expired: tuple[StepId, ...]
    verified: tuple[StepId, ...]

    def blocked_step(self, step: StepId) -> BlockedStep | None:
        """The explanation for *step* if it is blocked."""
        return next((b for b in self.blocked if b.step == step), None)


def completion_ratio(plan: Plan, states: Mapping[StepId, str]) -> float:
    """Verified steps divided by plan steps (``0.0`` for a plan without steps).

    A deliberately naive figure, kept for dashboards: it weighs an optional alternative like a
    decisive prerequisite. :func:`route_search` tells what actually remains.
    """
    order = topological_order(plan)
    if not order:
        return 0.0
    verified = sum(1 for sid in order if _state_of(states, sid) == VERIFIED)
    return verified / len(order)


def frontier(plan: Plan, states: Mapping[StepId, str]) -> Frontier:
    """Classify every step of *plan* under *states*; see :class:`Frontier` for the fields.

    An alternative that names no plan step counts with the state the mapping gives it.
    """
    ready: list[StepId] = []
    retryable: list[StepId] = []
    startable: list[ReadyStep] = []
    blocked: list[BlockedStep] = []
    reconcile: list[StepId] = []
    exhausted: list[StepId] = []
    failed: list[StepId] = []
    expired: list[StepId] = []
    verified: list[StepId] = []
    for sid in topological_order(plan):
        state = _state_of(states, sid)
        if state == VERIFIED:
            verified.append(sid)
            continue
        if state == FAILED:
            failed.append(sid)
        elif state == EXPIRED:
            expired.append(sid)
        if state == UNKNOWN:
            reconcile.append(sid)
            continue
        if state == EXHAUSTED:
            exhausted.append(sid)
            continue
        step = plan.step(sid)
        assert step is not None
        needs = _unsatisfied(step, states)
        if needs:
            blocked.append(BlockedStep(sid, state, needs))
            continue
        retry = state == FAILED
        (retryable if retry else ready).append(sid)
        startable.append(ReadyStep(sid, state, retry))
    return Frontier(
        ready=tuple(ready),
        retryable=tuple(retryable),
        startable=tuple(startable),
        blocked=tuple(blocked),
        needs_reconcile=tuple(reconcile),
        exhausted=tuple(exhausted),
        failed=tuple(failed),
        expired=tuple(expired),
        verified=tuple(verified),
    )


def _unsatisfied(step: Step, states: Mapping[StepId, str]) -> tuple[ClauseNeed, ...]:
    needs: list[ClauseNeed] = []
    for index, clause in enumerate(step.depends_on, start=1):
        named = tuple((alt, _state_of(states, alt)) for alt in clause.alternatives)
        if not any(state == VERIFIED for _, state in named):
            needs.append(ClauseNeed(index, named))
    return tuple(needs)


def graph_states(plan: Plan, states: Mapping[StepId, str]) -> dict[StepId, str]:
    """One display state per step for ``plan graph --status``: verified, ready, blocked, failed,
    unknown or expired (exhausted steps show as failed, needing reconciliation as unknown)."""
    f = frontier(plan, states)
    out: dict[StepId, str] = {}
    for sid in f.verified:
        out[sid] = "verified"
    for sid in (*f.ready, *f.retryable):
        out[sid] = "ready"
    for b in f.blocked:
        out[b.step] = "blocked"
    for sid in (*f.failed, *f.exhausted):
        out[sid] = "failed"
    for sid in f.needs_reconcile:
        out[sid] = "unknown"
    for sid in f.expired:
        out[sid] = "expired"
    return out
