"""Route search: the non-dominated routes to a goal, the cheapest one, and whether any
exists. :func:`route_search` runs :class:`~gitaudit.mission.solver._Solver` (exactly, then as a
bounded enumeration) and makes its answers inclusion-minimal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from gitaudit.frozen import frozen
from gitaudit.mission.solver import _OutOfBudget, _Solver
from gitaudit.mission.space import Route, _Goal, _Space
from gitaudit.plan.model import Plan, StepId

#: Default number of routes :func:`routes` returns.
DEFAULT_ROUTE_LIMIT: Final = 50
#: Default work budget of one route search (sub-problems expanded plus candidates built).
DEFAULT_MAX_WORK: Final = 250_000


@frozen
class RouteSearch:
    """The outcome of :func:`route_search`.

    ``routes``: non-dominated routes, cheapest first (ties: fewer steps, then the ``steps``
    tuples compared lexicographically). ``exact``: the first route is proven cheapest (false
    only when the work budget ran out even for the cheapest-only search, and a greedy route was
    returned instead). ``complete``: every non-dominated route is in ``routes`` (no limit or
    budget cut the enumeration). ``work``: work units spent.
    """

    routes: tuple[Route, ...]
    exact: bool
    complete: bool
    work: int


def _minimalise(space: _Space, goal: _Goal, ids: frozenset[int]) -> frozenset[int]:
    """Remove steps, dependants first, while the set stays a route; the result is minimal.

    (In topological order: if a smaller route existed, its most downstream missing step could
    be removed alone, because nothing in the set depends on it.)
    """
    chosen = set(ids)
    units = set(goal.units)
    dependants = space.dependants()
    for x in sorted(ids, reverse=True):
        if x in units:
            continue
        chosen.discard(x)
        needed = any(
            not any(a in chosen for a in clause) for clause in goal.clauses if x in clause
        ) or any(
            s in chosen and not any(a in chosen for a in clause) for s, clause in dependants[x]
        )
        if needed:
            chosen.add(x)
    return frozenset(chosen)


def route_search(
    plan: Plan,
    states: Mapping[StepId, str],
    goal: StepId | None = None,
    limit: int | None = DEFAULT_ROUTE_LIMIT,
    *,
    max_work: int = DEFAULT_MAX_WORK,
) -> RouteSearch:
    """The non-dominated routes to *goal* (``None``: the whole plan), cheapest first.

    *limit* bounds how many routes are returned (``None``: all of them, within the budget).
    *max_work* bounds the search in deterministic work units (roughly: sub-problems expanded,
    bound iterations and candidate routes built), so the answer never depends on the machine's
    speed or load. Two passes run:

    1. an exact cheapest-route search (branch and bound, budget *max_work*); if the budget runs
       out, a greedy route is returned instead and ``exact`` is false;
    2. a bounded enumeration keeping, per sub-problem, the ``limit + 1`` best non-dominated
       solutions (budget ``max_work // 2``, then a narrower pass with ``max_work // 8``). If
       both run out, only the cheapest route is returned.

    The routes are then made inclusion-minimal, deduplicated and filtered so that none
    dominates another. Returns no routes when the goal is not viable. Raises
    :class:`ValueError` for an unknown goal step or a *limit* below 1.
    """
    if limit is not None and limit < 1:
        raise ValueError("limit must be at least 1")
    space = _Space(plan, states)
    target = space.goal(goal)
    if target is None:
        return RouteSearch((), exact=True, complete=True, work=0)
    solver = _Solver(space, target, 1, max_work)
    try:
        found = solver.run()
        exact = True
    except (_OutOfBudget, RecursionError):
        found = [solver.greedy()]
        exact = False
    work = solver.work
    complete = False
    if exact:
        for k, budget in _enumeration_passes(limit, max_work):
            solver = _Solver(space, target, k, budget)
            try:
                enumerated = solver.run()
            except (_OutOfBudget, RecursionError):
                work += solver.work
                continue
            work += solver.work
            complete = not solver.truncated and (limit is None or len(enumerated) <= limit)
            found.extend(enumerated)
            break
    minimal = {_minimalise(space, target, ids) for ids in found}
    cands = [(math.fsum(space.cost[i] for i in ids), len(ids), ids) for ids in minimal]
    cands.sort(key=lambda c: (c[0], c[1], tuple(space.order[i] for i in sorted(c[2]))))
    kept: list[frozenset[int]] = []
    for _, _, ids in cands:
        if not any(o <= ids for o in kept):
            kept.append(ids)
    if limit is not None:
        kept = kept[:limit]
    return RouteSearch(
        tuple(space.route(ids, target) for ids in kept), exact=exact, complete=complete, work=work
    )


def _enumeration_passes(limit: int | None, max_work: int) -> list[tuple[int | None, int]]:
    """(k, budget) of the enumeration passes: one more than *limit* (to detect a cut), then
    a narrower one on a smaller budget."""
    first: int | None = None if limit is None else limit + 1
    passes: list[tuple[int | None, int]] = [(first, max_work // 2)]
    if first is None or first > 4:
        passes.append((4, max_work // 8))
    return passes


def routes(
    plan: Plan,
    states: Mapping[StepId, str],
    goal: StepId | None = None,
    limit: int | None = DEFAULT_ROUTE_LIMIT,
    *,
    max_work: int = DEFAULT_MAX_WORK,
) -> list[Route]:
    """The non-dominated routes of :func:`route_search`; ``[]`` when the goal is not viable."""
    return list(route_search(plan, states, goal, limit, max_work=max_work).routes)


def cheapest_route(
    plan: Plan,
    states: Mapping[StepId, str],
    goal: StepId | None = None,
    *,
    max_work: int = DEFAULT_MAX_WORK,
) -> Route | None:
    """The cheapest route, or ``None`` if the goal is not viable.

    Exact unless the work budget runs out (then a greedy route; :func:`route_search` reports
    which). Among equally cheap routes the choice is deterministic but unspecified;
    :func:`route_search` orders such ties by size, then lexicographically.
    """
    space = _Space(plan, states)
    target = space.goal(goal)
    if target is None:
        return None
    solver = _Solver(space, target, 1, max_work)
    try:
        ids = solver.run()[0]
    except (_OutOfBudget, RecursionError):
        ids = solver.greedy()
    return space.route(_minimalise(space, target, ids), target)


def goal_viable(plan: Plan, states: Mapping[StepId, str], goal: StepId | None = None) -> bool:
    """Whether *goal* has a route: linear time, no search."""
    return _Space(plan, states).goal(goal) is not None
