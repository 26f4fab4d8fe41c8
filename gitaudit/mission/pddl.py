"""The plan's AND/OR graph and its current state as a PDDL planning task (domain + problem).

The domain is the same for every plan (lifted, STRIPS with typing and action costs, the
IPC-2008 ``:action-costs`` form every optimal planner reads); the problem carries the graph and
the state:

* every step is an object; a step that is verified holds ``(verified s)`` from the start, and a
  step whose state lets it run (pending, expired) holds ``(usable s)``; failed, unknown and
  exhausted steps hold neither, so no plan relies on them (:data:`~gitaudit.mission.UNUSABLE`);
* every clause of ``depends_on`` is an object with its ``alternative`` steps; a clause is
  ``satisfied`` once one of its alternatives is verified, and a step's clauses are checked as a
  chain (``first-clause``, ``next-clause``, ``last-clause``), so no quantifier is needed;
* ``verify`` costs the step's ``cost``; every other action is free; costs are scaled by the
  smallest power of ten that makes them integers (optimal planners want integer costs), and the
  problem says by how much;
* the goal is one step, or (the whole plan) every required step verified and every ``must`` and
  ``should`` requirement covered by a verified step: exactly the goal of
  :func:`gitaudit.mission.route_search`, so a planner's optimal plan cost divided by the scale
  equals the cheapest route's cost.

Pure: a plan and a state mapping in, text out.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping

from gitaudit.frozen import frozen
from gitaudit.mission.states import UNUSABLE, VERIFIED, _state_of
from gitaudit.plan.graph import optional_steps, topological_order
from gitaudit.plan.model import Plan, StepId
from gitaudit.verdict import mandatory_coverage

DOMAIN_NAME = "gitaudit-mission"
MAX_DECIMALS = 6  # costs finer than a millionth are rounded (the problem says so)

DOMAIN = f"""\
; gitaudit: the AND/OR graph of a plan as a planning domain (see docs/mission-control.md)
(define (domain {DOMAIN_NAME})
  (:requirements :strips :typing :action-costs)
  (:types step clause requirement)
  (:predicates
    (usable ?s - step)                        ; the step's state lets it run
    (verified ?s - step)                      ; the step has (or gets) accepted evidence
    (unconditional ?s - step)                 ; the step depends on nothing
    (first-clause ?s - step ?c - clause)      ; the step's clauses, as a chain
    (next-clause ?c ?d - clause)
    (last-clause ?s - step ?c - clause)
    (alternative ?c - clause ?a - step)       ; any one alternative satisfies the clause
    (satisfied ?c - clause)
    (holds ?c - clause)                       ; this clause and every one before it satisfied
    (covers ?s - step ?r - requirement)
    (covered ?r - requirement))
  (:functions (total-cost) - number (cost ?s - step) - number)
  (:action satisfy
    :parameters (?c - clause ?a - step)
    :precondition (and (alternative ?c ?a) (verified ?a))
    :effect (satisfied ?c))
  (:action hold-first
    :parameters (?s - step ?c - clause)
    :precondition (and (first-clause ?s ?c) (satisfied ?c))
    :effect (holds ?c))
  (:action hold-next
    :parameters (?c ?d - clause)
    :precondition (and (next-clause ?c ?d) (holds ?c) (satisfied ?d))
    :effect (holds ?d))
  (:action verify
    :parameters (?s - step ?c - clause)
    :precondition (and (usable ?s) (last-clause ?s ?c) (holds ?c))
    :effect (and (verified ?s) (increase (total-cost) (cost ?s))))
  (:action verify-unconditional
    :parameters (?s - step)
    :precondition (and (usable ?s) (unconditional ?s))
    :effect (and (verified ?s) (increase (total-cost) (cost ?s))))
  (:action cover
    :parameters (?r - requirement ?s - step)
    :precondition (and (covers ?s ?r) (verified ?s))
    :effect (covered ?r)))
"""


@frozen
class PddlTask:
    """A plan as a planning task: the domain and problem texts, the factor every cost was
    multiplied by (``scale``; a planner's plan cost divided by it is the route cost), whether
    that scaling was exact, and each PDDL object name's step id."""

    domain: str
    problem: str
    scale: int
    exact: bool
    names: Mapping[str, StepId]


def _scale(costs: list[float]) -> tuple[int, bool]:
    """The smallest 10**k (k <= MAX_DECIMALS) that makes every cost an integer, and whether
    one does."""
    for k in range(MAX_DECIMALS + 1):
        factor = 10**k
        if all(abs(c * factor - round(c * factor)) < 1e-9 * max(1.0, c * factor) for c in costs):
            return factor, True
    return 10**MAX_DECIMALS, False


def _cost(value: float) -> float:
    return value if value >= 0 and math.isfinite(value) else 0.0  # as mission control plans it


class _Names:
    """PDDL names (a letter, then letters, digits, ``-`` and ``_``), unique, for any ids."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def make(self, prefix: str, raw: str) -> str:
        body = re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_").lower() or "x"
        name = f"{prefix}-{body}"
        n = 1
        while name in self.taken:
            n += 1
            name = f"{prefix}-{body}-{n}"
        self.taken.add(name)
        return name


def export(plan: Plan, states: Mapping[StepId, str], goal: StepId | None = None) -> PddlTask:
    """The planning task of *plan* under *states* for *goal* (a step, or None: the whole plan).

    ValueError for a goal step the plan lacks."""
    if goal is not None and plan.step(goal) is None:
        raise ValueError(f"unknown goal step {goal!r}")
    order = topological_order(plan)
    names = _Names()
    step_name = {sid: names.make("s", sid) for sid in order}
    costs = {sid: _cost(plan.step(sid).cost) for sid in order}  # type: ignore[union-attr]
    scale, exact = _scale(list(costs.values()))
    objects = [f"    {step_name[sid]} - step ; {sid}" for sid in order]
    init: list[str] = ["    (= (total-cost) 0)"]
    for sid in order:
        step = plan.step(sid)
        assert step is not None
        name = step_name[sid]
        state = _state_of(states, sid)
        init.append(f"    (= (cost {name}) {round(costs[sid] * scale)})")
        if state == VERIFIED:
            init.append(f"    (verified {name})")
        elif state not in UNUSABLE:
            init.append(f"    (usable {name})")
        if not step.depends_on:
            init.append(f"    (unconditional {name})")
            continue
        clause_names = []
        for k, clause in enumerate(step.depends_on, start=1):
            cname = names.make("c", f"{sid}-{k}")
            clause_names.append(cname)
            objects.append(f"    {cname} - clause ; {sid} needs {clause}")
            init.extend(
                f"    (alternative {cname} {step_name[alt]})"
                for alt in clause.alternatives
                if alt in step_name
            )
        init.append(f"    (first-clause {name} {clause_names[0]})")
        init.extend(f"    (next-clause {a} {b})" for a, b in itertools.pairwise(clause_names))
        init.append(f"    (last-clause {name} {clause_names[-1]})")
    goals: list[str] = []
    if goal is not None:
        goals.append(f"(verified {step_name[goal]})")
    else:
        optional = optional_steps(plan)
        goals.extend(f"(verified {step_name[sid]})" for sid in order if sid not in optional)
        for req, covering in mandatory_coverage(plan):
            rname = names.make("r", req.id)
            objects.append(f"    {rname} - requirement ; {req.priority} {req.id}")
            init.extend(f"    (covers {step_name[s.id]} {rname})" for s in covering)
            goals.append(f"(covered {rname})")
    header = [
        f"; gitaudit plan {plan.name!r}: goal "
        + (f"step {goal}" if goal is not None else "the whole plan"),
        f"; costs are multiplied by {scale}"
        + ("" if exact else f" and rounded (finer than 1/{scale})")
        + f": a plan of total-cost N costs N/{scale} in `git audit route`",
    ]
    problem = "\n".join(
        [
            *header,
            f"(define (problem {names.make('plan', plan.name)})",
            f"  (:domain {DOMAIN_NAME})",
            "  (:objects",
            *objects,
            "  )",
            "  (:init",
            *init,
            "  )",
            "  (:goal (and " + " ".join(goals) + "))" if goals else "  (:goal (and))",
            "  (:metric minimize (total-cost)))",
            "",
        ]
    )
    return PddlTask(DOMAIN, problem, scale, exact, {name: sid for sid, name in step_name.items()})
