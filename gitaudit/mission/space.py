"""The planning space: one plan under one state mapping, indexed for planning.

Steps are numbered by topological position and each clause is reduced to its viable,
non-verified alternatives (:class:`_Space`); the goal takes the same form (:class:`_Goal`).
:class:`Route` is how a set of positions is read back as step ids.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from gitaudit.frozen import frozen
from gitaudit.mission.states import UNUSABLE, VERIFIED, _state_of
from gitaudit.plan.graph import optional_steps, topological_order
from gitaudit.plan.model import Plan, Step, StepId
from gitaudit.verdict import mandatory_coverage


@frozen
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


_Alts = tuple[int, ...]  # one clause: sorted positions of its viable, non-verified alternatives


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
            for _req, steps in mandatory_coverage(self.plan):
                covering = [self.pos[s.id] for s in steps]
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
            for _req, steps in mandatory_coverage(self.plan):
                support.update(self.pos[s.id] for s in steps if self.verified[self.pos[s.id]])
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


@frozen
class _Goal:
    units: tuple[int, ...]  # non-verified steps the route must contain
    clauses: tuple[_Alts, ...]  # requirement clauses not yet covered by a verified step
    verified_units: tuple[int, ...]
    whole_plan: bool
