"""Repair cones and impact: what withdrawing evidence (named steps, or the steps a change of
paths touches) does to the verified steps and to the goal's cheapest route.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import field

from gitaudit.frozen import frozen
from gitaudit.mission.search import DEFAULT_MAX_WORK, cheapest_route
from gitaudit.mission.space import Route, _Space
from gitaudit.mission.states import FAILED, PENDING, UNUSABLE, VERIFIED, _state_of
from gitaudit.plan.graph import topological_order
from gitaudit.plan.inputs import matches_input
from gitaudit.plan.model import Plan, StepId


@frozen
class Impact:
    """What invalidating some evidence does to the mission (see :func:`impact`).

    * ``invalidated``: the steps whose evidence is invalidated (plan steps, topological order).
    * ``refuted``: whether they were treated as failed (true) or as pending (false).
    * ``reopened``: the repair cone: verified steps that are no longer verified.
    * ``impossible``: steps not invalidated that were verified or viable before and are
      impossible after (not verified and not viable).
    * ``goal_viable``: whether the goal still has a route afterwards.
    * ``cheapest_cost_before`` / ``cheapest_cost_after``: the cost of the cheapest route
      before and after (``None`` when the goal is not viable); ``route_after`` is that route.
    """

    invalidated: tuple[StepId, ...]
    refuted: bool
    reopened: tuple[StepId, ...]
    impossible: tuple[StepId, ...]
    goal_viable: bool
    cheapest_cost_before: float | None
    cheapest_cost_after: float | None
    route_after: Route | None = field(default=None, compare=False)


def invalidated_states(
    plan: Plan,
    states: Mapping[StepId, str],
    invalidate: Collection[StepId],
    *,
    refuted: bool = True,
) -> dict[StepId, str]:
    """The state mapping after invalidating *invalidate* and closing the repair cone.

    Each plan step gets its normalised state. Invalidated steps become ``failed`` when
    *refuted* (their evidence is shown wrong: re-running them is not presumed to help), else
    ``pending`` (their evidence is merely stale) — except that ``failed``, ``unknown`` and
    ``exhausted`` steps keep their state either way. Every other step of the repair cone becomes
    ``pending``. Raises :class:`ValueError` for a step id that is not in the plan.
    """
    after, _ = _invalidate(plan, states, invalidate, refuted)
    return after


def _invalidate(
    plan: Plan, states: Mapping[StepId, str], invalidate: Collection[StepId], refuted: bool
) -> tuple[dict[StepId, str], list[StepId]]:
    order = topological_order(plan)
    unknown = sorted(set(invalidate) - set(order))
    if unknown:
        raise ValueError(f"unknown step(s): {', '.join(unknown)}")
    after = {sid: _state_of(states, sid) for sid in order}
    verified = {sid for sid, st in after.items() if st == VERIFIED}
    for sid in invalidate:
        if after[sid] not in UNUSABLE:
            after[sid] = FAILED if refuted else PENDING
    dependants: dict[StepId, list[tuple[StepId, tuple[StepId, ...]]]] = {sid: [] for sid in order}
    for sid in order:
        step = plan.step(sid)
        assert step is not None
        for clause in step.depends_on:
            for alt in set(clause.alternatives):
                if alt in dependants:
                    dependants[alt].append((sid, clause.alternatives))

    def still_verified(alt: StepId) -> bool:
        return _state_of(after if alt in after else states, alt) == VERIFIED

    queue = [sid for sid in invalidate if sid in verified]
    while queue:
        lost = queue.pop()
        for dep, alternatives in dependants[lost]:
            # the clause had a verified alternative (lost): reopen when none remains
            if after[dep] == VERIFIED and not any(still_verified(a) for a in alternatives):
                after[dep] = PENDING
                queue.append(dep)
    reopened = [sid for sid in order if sid in verified and after[sid] != VERIFIED]
    return after, reopened


def impact(
    plan: Plan,
    states: Mapping[StepId, str],
    invalidate: Collection[StepId],
    goal: StepId | None = None,
    *,
    refuted: bool = True,
    max_work: int = DEFAULT_MAX_WORK,
) -> Impact:
    """What happens to *goal* if the evidence of *invalidate* is withdrawn.

    The repair cone (``reopened``) is computed as defined in :mod:`gitaudit.mission`; the
    invalidated steps are then planned as failed (*refuted*, the default: the evidence was shown
    wrong, as in failure injection) or as pending (``refuted=False``: the evidence is stale and
    the step may be re-run, as for changed inputs). ``impossible`` and ``goal_viable`` follow from
    the states after; see :class:`Impact`.
    """
    after, reopened = _invalidate(plan, states, invalidate, refuted)
    before_space = _Space(plan, states)
    after_space = _Space(plan, after)
    targets = set(invalidate)
    impossible = tuple(
        sid
        for i, sid in enumerate(after_space.order)
        if sid not in targets
        and before_space.viable[i]
        and not after_space.viable[i]
        and not after_space.verified[i]
    )
    before_route = cheapest_route(plan, states, goal, max_work=max_work)
    after_route = cheapest_route(plan, after, goal, max_work=max_work)
    return Impact(
        invalidated=tuple(sid for sid in after_space.order if sid in targets),
        refuted=refuted,
        reopened=tuple(reopened),
        impossible=impossible,
        goal_viable=after_route is not None,
        cheapest_cost_before=None if before_route is None else before_route.cost,
        cheapest_cost_after=None if after_route is None else after_route.cost,
        route_after=after_route,
    )


def steps_for_paths(plan: Plan, changed_paths: Iterable[str]) -> tuple[StepId, ...]:
    """Steps whose evidence a change to *changed_paths* touches, in topological order.

    A step is touched when one of its ``inputs`` patterns matches a changed path
    (:func:`matches_input`), or when it declares no ``inputs`` at all (it depends on the whole
    tree) and at least one path changed.
    """
    paths = [p for p in changed_paths if p]
    if not paths:
        return ()
    touched: list[StepId] = []
    for sid in topological_order(plan):
        step = plan.step(sid)
        assert step is not None
        if not step.inputs or any(matches_input(pat, p) for pat in step.inputs for p in paths):
            touched.append(sid)
    return tuple(touched)


def impact_paths(
    plan: Plan,
    changed_paths: Iterable[str],
    states: Mapping[StepId, str],
    goal: StepId | None = None,
    *,
    max_work: int = DEFAULT_MAX_WORK,
) -> Impact:
    """:func:`impact` of invalidating :func:`steps_for_paths` as stale (``refuted=False``)."""
    touched = steps_for_paths(plan, changed_paths)
    return impact(plan, states, touched, goal, refuted=False, max_work=max_work)
