"""Mission control over a plan: the verified frontier, remaining routes and repair cones.

Everything here is a pure function of a :class:`~gitaudit.plan.model.Plan` and a mapping of step
states; nothing reads files or git. The vocabulary, used verbatim by the docs:

**Step state.** One of ``verified`` (the step has accepted evidence), ``failed`` (its last
attempt failed and attempts remain), ``exhausted`` (it failed and no attempts remain),
``unknown`` (an attempt was made but its outcome could not be established), ``expired`` (it had
evidence that is no longer valid) and ``pending`` (no evidence yet). A step missing from the
mapping, or mapped to any other value, is ``pending``. ``expired`` plans exactly like
``pending`` (the step may simply be run again) but is reported separately.

**Clause.** One AND item of a step's ``depends_on``: a set of *alternatives*, at least one of
which must be verified. A plain dependency is a clause with one alternative; ``any_of`` is an OR
clause. A clause is *satisfied* when one of its alternatives is verified.

**Usable step.** A step that is verified, or whose state allows it to be run (``pending``,
``expired`` or any unrecognised state). ``failed``, ``unknown`` and ``exhausted`` steps are not
usable for planning: a route never relies on work that is known to have failed, whose outcome
must first be reconciled, or that can no longer be attempted.

**Viable step.** A step that is verified, or usable and such that every clause has a viable
alternative: some sequence of runs of usable steps can still verify it. A step that is not
viable is *impossible*.

**Verified frontier.** The steps that may start now: every clause satisfied (see
:func:`frontier`).

**Goal.** Either one step, or (goal ``None``) the whole plan: every required step (every step
that is not an alternative-only step in the sense of
:func:`gitaudit.plan.graph.optional_steps`, which includes every sink) and, for each ``must`` or
``should`` requirement, at least one step that covers it.

**Route** (remaining solution subgraph). A set ``R`` of non-verified usable steps such that,
with ``V`` the verified steps, every step of ``R`` has each clause satisfied by a step of
``R ∪ V``, and the goal holds in ``R ∪ V``. Its *cost* is the sum of the costs of ``R``
(verified steps cost nothing). A route ``A`` is *dominated* by a route ``B`` when ``B ⊆ A`` and
``cost(B) <= cost(A)``; since costs are non-negative the non-dominated routes are exactly the
inclusion-minimal ones. The goal is *viable* when at least one route exists.

**Cheapest route.** Finding it is NP-hard in general (OR clauses with shared prerequisites
encode set cover), so :func:`route_search` runs an exact branch and bound with memoisation,
decomposition into independent parts and admissible bounds (h-max, LM-cut) under a
deterministic work budget; it reports whether the answer is proven (``exact``) and whether the
enumeration of the other routes is complete.

**Repair cone.** The verified steps that lose their verification when some evidence is
invalidated: the invalidated steps themselves, then (transitively) every verified step that has
a clause which had a verified alternative and now has none. A verified step whose OR clause keeps
one verified alternative stays verified and stops the cone.

Plans are expected to be acyclic (validation rejects cycles). On a cyclic plan the functions still
terminate: an alternative that does not come before its dependant in
:func:`gitaudit.plan.graph.topological_order` is ignored for planning. Costs are expected to be
non-negative (the schema enforces it); negative or NaN costs are planned as 0.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from gitaudit.plan.graph import optional_steps, topological_order
from gitaudit.plan.inputs import matches_input
from gitaudit.plan.model import Plan, Step, StepId

VERIFIED: Final = "verified"
FAILED: Final = "failed"
UNKNOWN: Final = "unknown"
EXHAUSTED: Final = "exhausted"
EXPIRED: Final = "expired"
PENDING: Final = "pending"

#: The recognised step states; anything else is read as ``pending``.
STATES: Final = (VERIFIED, FAILED, UNKNOWN, EXHAUSTED, EXPIRED, PENDING)
#: States that keep a non-verified step out of every route.
UNUSABLE: Final = frozenset({FAILED, UNKNOWN, EXHAUSTED})

#: Default number of routes :func:`routes` returns.
DEFAULT_ROUTE_LIMIT: Final = 50
#: Default work budget of one route search (sub-problems expanded plus candidates built).
DEFAULT_MAX_WORK: Final = 250_000


def normalise_state(value: str | None) -> str:
    """The planning state of a raw state value: a recognised state, else ``pending``."""
    return value if value in STATES else PENDING


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class BlockedStep:
    """A non-verified step that cannot start: ``needs`` lists each unsatisfied clause."""

    step: StepId
    state: str
    needs: tuple[ClauseNeed, ...]

    def __str__(self) -> str:
        return f"{self.step}: " + "; ".join(str(n) for n in self.needs)


@dataclass(frozen=True)
class ReadyStep:
    """A step whose every clause is satisfied. ``retry`` is true when its last attempt failed."""

    step: StepId
    state: str
    retry: bool


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Route:
    """One non-dominated remaining solution subgraph for a goal.

    ``steps``: the non-verified steps still to verify, in topological order. ``cost``: the sum
    of their costs. ``all_steps``: ``steps`` plus the verified steps the route builds on (the
    verified goal steps, for goal ``None`` the verified steps covering a mandatory requirement,
    and transitively every verified alternative named by a clause of a step already included),
    in topological order.
    """

    steps: tuple[StepId, ...]
    cost: float
    all_steps: tuple[StepId, ...]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


# --------------------------------------------------------------------------------------------
# Frontier and progress


def _state_of(states: Mapping[StepId, str], sid: StepId) -> str:
    return normalise_state(states.get(sid))


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


# --------------------------------------------------------------------------------------------
# The planning space: steps as topological positions, clauses filtered to viable alternatives

_Alts = tuple[int, ...]  # one clause: sorted positions of its viable, non-verified alternatives
_Cand = tuple[float, int, frozenset[int]]  # cost, size, steps
_Part = tuple[frozenset[_Alts], frozenset[int], float]  # open clauses, their cone, lower bound


class _OutOfBudget(Exception):
    pass


class _Space:
    """One plan under one state mapping, indexed for planning.

    Steps are numbered by topological position. For each viable non-verified step, ``clauses``
    holds its clauses that no verified step satisfies, each reduced to its viable alternatives
    that come earlier in topological order.
    """

    def __init__(self, plan: Plan, states: Mapping[StepId, str]) -> None:
        self.plan = plan
        self.states = states
        self.order = topological_order(plan)
        self.pos = {sid: i for i, sid in enumerate(self.order)}
        self.steps: list[Step] = []
        for sid in self.order:
            step = plan.step(sid)
            assert step is not None
            self.steps.append(step)
        self.state = [_state_of(states, sid) for sid in self.order]
        self.cost = [_plannable_cost(s.cost) for s in self.steps]
        self.verified = [st == VERIFIED for st in self.state]
        self.viable = [False] * len(self.order)
        self.clauses: list[tuple[_Alts, ...]] = [() for _ in self.order]
        for i, step in enumerate(self.steps):
            if self.verified[i]:
                self.viable[i] = True
            elif self.state[i] not in UNUSABLE:
                reduced = self._reduce(i, step)
                if reduced is not None:
                    self.viable[i] = True
                    self.clauses[i] = reduced
        self._dependants: list[list[tuple[int, _Alts]]] | None = None

    def _reduce(self, i: int, step: Step) -> tuple[_Alts, ...] | None:
        kept: dict[_Alts, None] = {}
        for clause in step.depends_on:
            alts: set[int] = set()
            satisfied = False
            for alt in clause.alternatives:
                j = self.pos.get(alt)
                if j is None:
                    satisfied = _state_of(self.states, alt) == VERIFIED
                elif self.verified[j]:
                    satisfied = True
                elif j < i and self.viable[j]:
                    alts.add(j)
                if satisfied:
                    break
            if satisfied:
                continue
            if not alts:
                return None
            kept.setdefault(tuple(sorted(alts)), None)
        return tuple(kept)

    def dependants(self) -> list[list[tuple[int, _Alts]]]:
        """position -> (dependant, clause) for every reduced clause naming it."""
        if self._dependants is None:
            deps: list[list[tuple[int, _Alts]]] = [[] for _ in self.order]
            for s, clauses in enumerate(self.clauses):
                for clause in clauses:
                    for a in clause:
                        deps[a].append((s, clause))
            self._dependants = deps
        return self._dependants

    def goal(self, goal: StepId | None) -> _Goal | None:
        """The goal as unit steps and requirement clauses, or ``None`` when it is not viable."""
        if goal is not None:
            if goal not in self.pos:
                raise ValueError(f"unknown goal step {goal!r}")
            units = [self.pos[goal]]
            requirement_clauses: list[_Alts] = []
        else:
            optional = optional_steps(self.plan)
            units = [i for i, sid in enumerate(self.order) if sid not in optional]
            requirement_clauses = []
            for req in self.plan.requirements:
                if not req.mandatory:
                    continue
                covering = [self.pos[s.id] for s in self.plan.covering_steps(req.id)]
                if any(self.verified[i] for i in covering):
                    continue
                alts = tuple(sorted({i for i in covering if self.viable[i]}))
                if not alts:
                    return None
                requirement_clauses.append(alts)
        if not all(self.viable[i] for i in units):
            return None
        verified_units = tuple(i for i in units if self.verified[i])
        return _Goal(
            units=tuple(i for i in units if not self.verified[i]),
            clauses=tuple(dict.fromkeys(requirement_clauses)),
            verified_units=verified_units,
            whole_plan=goal is None,
        )

    def route(self, ids: Iterable[int], goal: _Goal) -> Route:
        remaining = sorted(ids)
        support: set[int] = set(remaining) | set(goal.verified_units)
        if goal.whole_plan:
            for req in self.plan.requirements:
                if req.mandatory:
                    support.update(
                        self.pos[s.id]
                        for s in self.plan.covering_steps(req.id)
                        if self.verified[self.pos[s.id]]
                    )
        todo = list(support)
        while todo:
            i = todo.pop()
            for clause in self.steps[i].depends_on:
                for alt in clause.alternatives:
                    j = self.pos.get(alt)
                    if j is not None and self.verified[j] and j not in support:
                        support.add(j)
                        todo.append(j)
        return Route(
            steps=tuple(self.order[i] for i in remaining),
            cost=math.fsum(self.cost[i] for i in remaining),
            all_steps=tuple(self.order[i] for i in sorted(support)),
        )


def _plannable_cost(cost: float) -> float:
    return cost if cost >= 0 else 0.0  # NaN compares false: planned as 0


@dataclass(frozen=True)
class _Goal:
    units: tuple[int, ...]  # non-verified steps the route must contain
    clauses: tuple[_Alts, ...]  # requirement clauses not yet covered by a verified step
    verified_units: tuple[int, ...]
    whole_plan: bool


# --------------------------------------------------------------------------------------------
# Route search


class _Solver:
    """Branch and bound over OR clauses, with independent parts split and sub-problems memoised.

    A sub-problem is a set ``C`` of open clauses (each still needs one of its alternatives)
    under a chosen set ``T``. Its *cone* ``D`` is every step that could be added to serve it:
    the alternatives of ``C`` and, transitively, the alternatives of their clauses that ``T``
    does not satisfy. ``(C, D)`` determines the sub-problem completely (a clause of a step in
    ``D`` is satisfied by ``T`` exactly when it has an alternative outside ``D``), so results
    are memoised on it. Clauses whose cones are disjoint are independent: they are solved
    separately and their solutions combine by union, which stays minimal.

    Branching takes the most downstream open clause and tries each alternative together with
    everything it forces (single-alternative clauses, transitively); every inclusion-minimal
    solution lies on some branch, so nothing is lost. Each sub-problem keeps its ``k`` best
    minimal solutions (all of them when ``k`` is ``None``) at or under an upper bound, and
    prunes with admissible lower bounds: h-max (the cheapest alternative of a clause plus,
    recursively, the dearest clause it still needs) while no upper bound is known, LM-cut once
    one is. With ``k == 1`` this is an exact branch and bound for the cheapest route.
    """

    def __init__(self, space: _Space, goal: _Goal, k: int | None, budget: float) -> None:
        self.space = space
        self.goal = goal
        self.k = k
        self.budget = budget
        self.work = 0
        self.truncated = False
        self.memo: dict[tuple[frozenset[_Alts], frozenset[int]], tuple[float, list[_Cand]]] = {}
        self.bounds: dict[tuple[frozenset[_Alts], frozenset[int]], tuple[float, bool]] = {}

    def tick(self, units: int = 1) -> None:
        self.work += units
        if self.work > self.budget:
            raise _OutOfBudget

    def close(self, chosen: set[int], seeds: Iterable[int]) -> list[int]:
        """Add *seeds* and every step they force (single-alternative clauses) to *chosen*."""
        clauses = self.space.clauses
        added: list[int] = []
        stack = [s for s in seeds if s not in chosen]
        while stack:
            x = stack.pop()
            if x in chosen:
                continue
            chosen.add(x)
            added.append(x)
            for clause in clauses[x]:
                if len(clause) == 1 and clause[0] not in chosen:
                    stack.append(clause[0])
        return added

    def open_clauses(
        self, previous: Iterable[_Alts], added: Iterable[int], chosen: frozenset[int]
    ) -> frozenset[_Alts]:
        clauses = self.space.clauses
        out = {c for c in previous if chosen.isdisjoint(c)}
        for x in added:
            for c in clauses[x]:
                if len(c) > 1 and chosen.isdisjoint(c):
                    out.add(c)
        return frozenset(out)

    def start(self) -> tuple[frozenset[int], frozenset[_Alts]]:
        chosen: set[int] = set()
        seeds = list(self.goal.units) + [c[0] for c in self.goal.clauses if len(c) == 1]
        added = self.close(chosen, seeds)
        multi = [c for c in self.goal.clauses if len(c) > 1]
        frozen = frozenset(chosen)
        return frozen, self.open_clauses(multi, added, frozen)

    def prune(self, cands: Iterable[_Cand]) -> list[_Cand]:
        """Drop duplicates and dominated candidates; cheapest first, then fewest steps."""
        unique = {c[2]: c for c in cands}
        self.tick(len(unique) // 16)
        kept: list[_Cand] = []
        for c in sorted(unique.values(), key=_order_key):
            if not any(o[2] <= c[2] for o in kept):
                kept.append(c)
        return kept

    def solve(
        self,
        open_: frozenset[_Alts],
        chosen: frozenset[int],
        ub: float,
        parts: list[_Part] | None = None,
    ) -> list[_Cand]:
        """The best solutions of *open_* under *chosen* costing at most *ub*."""
        if not open_:
            return [_EMPTY]
        if parts is None:
            parts = self.components(open_, chosen)
        total = math.fsum(lb for _, _, lb in parts)
        if not _within(total, ub):
            return []
        if ub < math.inf:  # a stronger bound pays only when it can prune
            stronger: list[_Part] = []
            for c, d, lb in parts:
                target = ub - (total - lb)
                strong = self.strong_bound(c, d, chosen, target)
                if strong > lb:
                    total += strong - lb
                    lb = strong
                if not _within(total, ub):
                    return []
                stronger.append((c, d, lb))
            parts = stronger
        lists: list[list[_Cand]] = []
        for part, cone, lb in sorted(parts, key=lambda p: -p[2]):
            cands = self.component(part, cone, chosen, ub - (total - lb))
            if not cands:
                return []
            total += cands[0][0] - lb
            lists.append(cands)
        return self.product(lists, ub)

    def components(self, open_: frozenset[_Alts], chosen: frozenset[int]) -> list[_Part]:
        """Split *open_* into independent parts: (clauses, cone, lower bound) each.

        Two clauses interact when their cones share a step, which is exactly when they are
        connected in the undirected graph of the steps in all the cones (every edge of that
        graph lies inside some clause's cone). The lower bound of a part is its largest h-max
        clause cost: the cheapest alternative's cost plus, recursively, the dearest of the
        clauses that alternative still needs.
        """
        clauses = self.space.clauses
        cost = self.space.cost
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            root = x
            while parent[root] != root:
                root = parent[root]
            while parent[x] != root:
                parent[x], x = root, parent[x]
            return root

        stack = [a for c in open_ for a in c]
        while stack:
            x = stack.pop()
            if x in parent:
                continue
            parent[x] = x
            for dep in clauses[x]:
                if chosen.isdisjoint(dep):
                    stack.extend(dep)
        self.tick(1 + len(parent) // 8)
        region = sorted(parent)
        hmax: dict[int, float] = {}
        for x in region:  # dependencies come first in topological order
            need = 0.0
            for dep in clauses[x]:
                if chosen.isdisjoint(dep):
                    need = max(need, min(hmax[a] for a in dep))
                    rx = find(x)
                    for a in dep:
                        ra = find(a)
                        if ra != rx:
                            parent[ra] = rx
            hmax[x] = cost[x] + need
        for c in open_:
            rc = find(c[0])
            for a in c[1:]:
                ra = find(a)
                if ra != rc:
                    parent[ra] = rc
        grouped: dict[int, tuple[list[_Alts], list[int], list[float]]] = {}
        for c in open_:
            group = grouped.setdefault(find(c[0]), ([], [], [0.0]))
            group[0].append(c)
            group[2][0] = max(group[2][0], min(hmax[a] for a in c))
        for x in region:
            grouped[find(x)][1].append(x)
        return [(frozenset(c), frozenset(steps), lb[0]) for c, steps, lb in grouped.values()]

    def strong_bound(
        self, open_: frozenset[_Alts], cone: frozenset[int], chosen: frozenset[int], target: float
    ) -> float:
        """LM-cut for one part, memoised; it may stop early once it exceeds *target*."""
        key = (open_, cone)
        known = self.bounds.get(key)
        if known is not None and (known[1] or not _within(known[0], target)):
            return known[0]
        bound, complete = self.lmcut(sorted(open_), cone, chosen, target)
        self.bounds[key] = (bound, complete)
        return bound

    def lmcut(
        self, goal: Sequence[_Alts], cone: frozenset[int], chosen: frozenset[int], target: float
    ) -> tuple[float, bool]:
        """The LM-cut lower bound on the cost of satisfying *goal* with steps of *cone*.

        The problem is a delete-free planning task: each step is an action whose preconditions
        are its unsatisfied clauses and which achieves every clause naming it. LM-cut (Helmert
        and Domshlak, 2009) repeatedly takes the h-max justification graph, finds a cut of
        actions every plan must use, charges the cheapest of them and discounts the rest; the
        sum of the charges never exceeds the cost of any solution. Plans are DAGs with
        alternatives earlier in topological order, so each h-max pass is one linear sweep.
        Returns the bound and whether it is final (false: stopped once above *target*).
        """
        clauses = self.space.clauses
        steps = sorted(cone)
        local = {x: i for i, x in enumerate(steps)}
        fact_of: dict[_Alts, int] = {}
        achievers: list[list[int]] = []

        def fact(c: _Alts) -> int:
            f = fact_of.get(c)
            if f is None:
                f = fact_of[c] = len(achievers)
                achievers.append([local[a] for a in c])
            return f

        pre = [[fact(c) for c in clauses[x] if chosen.isdisjoint(c)] for x in steps]
        goal_facts = [fact(c) for c in goal]
        effects: list[list[int]] = [[] for _ in steps]
        for f, alts in enumerate(achievers):
            for i in alts:
                effects[i].append(f)
        remaining = [self.space.cost[x] for x in steps]
        last = [max(alts) for alts in achievers]  # a fact's value settles after its last achiever
        n = len(steps)
        n_facts = len(achievers)
        hstep = [0.0] * n
        hfact = [-1.0] * len(achievers)
        pcf = [-1] * n
        start = 0  # steps before this index kept their h-max value since the previous round
        total = 0.0
        for _ in range(n + 1):
            self.tick(1 + n // 16)
            get = hstep.__getitem__
            for i in range(start, n):
                top = -1.0
                arg = -1
                for f in pre[i]:
                    v = hfact[f]
                    if v < 0.0:
                        v = hfact[f] = min(map(get, achievers[f]))
                    if v > top:
                        top = v
                        arg = f
                pcf[i] = arg
                hstep[i] = remaining[i] + top if arg >= 0 else remaining[i]
            goal_value = -1.0
            goal_pcf = -1
            for f in goal_facts:
                v = hfact[f]
                if v < 0.0:
                    v = hfact[f] = min(map(get, achievers[f]))
                if v > goal_value:
                    goal_value, goal_pcf = v, f
            if goal_value <= _EPSILON:
                break
            zone = [False] * n_facts  # facts that reach the goal through zero-cost edges
            zone[goal_pcf] = True
            todo = [goal_pcf]
            while todo:
                for a in achievers[todo.pop()]:
                    p = pcf[a]
                    if p >= 0 and not zone[p] and remaining[a] <= _EPSILON:
                        zone[p] = True
                        todo.append(p)
            before = [False] * n_facts  # facts reached from the start avoiding the zone
            cut: list[int] = []
            for i in range(n):
                p = pcf[i]
                if p < 0 or before[p]:
                    crosses = False
                    for f in effects[i]:
                        if zone[f]:
                            crosses = True
                        else:
                            before[f] = True
                    if crosses:
                        cut.append(i)
            if not cut:
                break
            charge = min(remaining[i] for i in cut)
            if charge <= _EPSILON:
                break
            total += charge
            for i in cut:
                remaining[i] -= charge
            if not _within(total, target):
                return total, False
            start = cut[0]  # cut is in index order: everything before it is unchanged
            for f, top_achiever in enumerate(last):
                if top_achiever >= start:
                    hfact[f] = -1.0
        return total, True

    def component(
        self, open_: frozenset[_Alts], cone: frozenset[int], chosen: frozenset[int], ub: float
    ) -> list[_Cand]:
        key = (open_, cone)
        entry = self.memo.get(key)
        if entry is not None:
            used, listed = entry
            if ub <= used or (self.k is not None and len(listed) >= self.k):
                return [c for c in listed if _within(c[0], ub)]
        self.tick()
        cost = self.space.cost
        branch = min(open_, key=_branch_key)
        options: list[tuple[float, float, int, int, list[int], frozenset[int], list[_Part]]] = []
        for alt in branch:
            trial = set(chosen)
            added = self.close(trial, (alt,))
            grown = frozenset(trial)
            add_cost = math.fsum(cost[i] for i in added)
            rest = self.open_clauses(open_, added, grown)
            parts = self.components(rest, grown) if rest else []
            estimate = add_cost + math.fsum(lb for _, _, lb in parts)
            options.append((estimate, add_cost, len(added), alt, added, grown, parts))
        options.sort(key=lambda o: o[:4])
        kept: list[_Cand] = []
        for estimate, add_cost, size, _, added, grown, parts in options:
            full = self.k is not None and len(kept) >= self.k
            threshold = min(ub, kept[-1][0]) if full else ub
            if not _within(estimate, threshold):
                break  # options are sorted by their lower bound: no later one fits either
            rest = frozenset(c for part in parts for c in part[0])
            subs = self.solve(rest, grown, threshold - add_cost, parts)
            base = frozenset(added)
            self.tick(len(subs))
            cands = kept + [(add_cost + c, size + n, base | ids) for c, n, ids in subs]
            kept = self.prune(cands)
            if self.k is not None and len(kept) > self.k:
                kept = kept[: self.k]
        if self.k is not None and len(kept) >= self.k:
            self.truncated = True
        self.memo[key] = (ub, kept)
        return kept

    def product(self, lists: Sequence[list[_Cand]], ub: float) -> list[_Cand]:
        """The best unions of one candidate per independent part (their sets are disjoint)."""
        result = lists[0]
        for other in lists[1:]:
            pairs = [
                (a[0] + b[0], a[1] + b[1], ia, ib)
                for ia, a in enumerate(result)
                for ib, b in enumerate(other)
                if _within(a[0] + b[0], ub)
            ]
            self.tick(len(pairs) // 4 + 1)
            if self.k is not None and len(pairs) > self.k:
                self.truncated = True
                pairs = heapq.nsmallest(self.k, pairs)
            else:
                pairs.sort()
            result = [(cost, size, result[ia][2] | other[ib][2]) for cost, size, ia, ib in pairs]
        return result

    def run(self) -> list[frozenset[int]]:
        """The best routes, each including the steps the goal forces."""
        chosen, open_ = self.start()
        return [chosen | c[2] for c in self.solve(open_, chosen, math.inf)]

    def greedy(self) -> frozenset[int]:
        """A valid route, not necessarily the cheapest, found without backtracking.

        It follows the branching of the exact search but commits, at each OR clause, to the
        alternative with the lowest estimate (its forced cost plus the h-max bound of what
        remains open). It ignores the work budget, and costs one bound per alternative.
        """
        self.budget = math.inf
        chosen, open_ = self.start()
        cost = self.space.cost
        while open_:
            branch = min(open_, key=_branch_key)
            best: tuple[float, float, int, frozenset[int], frozenset[_Alts]] | None = None
            for alt in branch:
                trial = set(chosen)
                added = self.close(trial, (alt,))
                grown = frozenset(trial)
                rest = self.open_clauses(open_, added, grown)
                add_cost = math.fsum(cost[i] for i in added)
                estimate = add_cost + math.fsum(lb for _, _, lb in self.components(rest, grown))
                option = (estimate, add_cost, alt, grown, rest)
                if best is None or option[:3] < best[:3]:
                    best = option
            assert best is not None
            chosen, open_ = best[3], best[4]
        return chosen


_EMPTY: Final[_Cand] = (0.0, 0, frozenset())
_EPSILON: Final = 1e-12


def _order_key(c: _Cand) -> tuple[float, int]:
    return (c[0], c[1])


def _branch_key(c: _Alts) -> tuple[int, int, _Alts]:
    """Branch on the most downstream clause first (then the fewest alternatives).

    Deciding dependants before their prerequisites lets each decision settle which upstream
    clauses are needed at all; measured on random layered plans it expands an order of
    magnitude fewer sub-problems than upstream-first.
    """
    return (-c[0], len(c), c)


def _within(cost: float, bound: float) -> bool:
    """``cost <= bound`` up to float rounding (sums of the same costs in another order)."""
    return cost <= bound + 1e-9 * max(1.0, abs(bound))


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


# --------------------------------------------------------------------------------------------
# Repair cones


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

    The repair cone (``reopened``) is computed as defined in the module docstring; the
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
