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

from gitaudit.mission.progress import (
    BlockedStep,
    ClauseNeed,
    Frontier,
    ReadyStep,
    completion_ratio,
    frontier,
    graph_states,
)
from gitaudit.mission.repair import (
    Impact,
    impact,
    impact_paths,
    invalidated_states,
    steps_for_paths,
)
from gitaudit.mission.search import (
    DEFAULT_MAX_WORK,
    DEFAULT_ROUTE_LIMIT,
    RouteSearch,
    cheapest_route,
    goal_viable,
    route_search,
    routes,
)
from gitaudit.mission.space import Route
from gitaudit.mission.states import (
    EXHAUSTED,
    EXPIRED,
    FAILED,
    PENDING,
    STATES,
    UNKNOWN,
    UNUSABLE,
    VERIFIED,
    normalise_state,
)

__all__ = [
    "DEFAULT_MAX_WORK",
    "DEFAULT_ROUTE_LIMIT",
    "EXHAUSTED",
    "EXPIRED",
    "FAILED",
    "PENDING",
    "STATES",
    "UNKNOWN",
    "UNUSABLE",
    "VERIFIED",
    "BlockedStep",
    "ClauseNeed",
    "Frontier",
    "Impact",
    "ReadyStep",
    "Route",
    "RouteSearch",
    "cheapest_route",
    "completion_ratio",
    "frontier",
    "goal_viable",
    "graph_states",
    "impact",
    "impact_paths",
    "invalidated_states",
    "normalise_state",
    "route_search",
    "routes",
    "steps_for_paths",
]
