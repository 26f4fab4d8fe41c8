"""Mission control (gitaudit.mission): the verified frontier, routes and repair cones.

The acceptance tests replay the worked release scenario (tests/fixtures/plans/release-mission.json);
the property tests check every function against brute force on small random AND/OR plans.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitaudit.mission import (
    STATES,
    BlockedStep,
    ClauseNeed,
    Route,
    cheapest_route,
    completion_ratio,
    frontier,
    goal_viable,
    impact,
    impact_paths,
    invalidated_states,
    route_search,
    routes,
    steps_for_paths,
)
from gitaudit.plan.graph import optional_steps
from gitaudit.plan.inputs import matches_input
from gitaudit.plan.load import load_plan
from gitaudit.plan.model import Plan

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "plans" / "release-mission.json"
RELEASE_ROUTE = ["risk_approval", "deploy_canary", "observe_readback", "release"]


def load(value: Mapping[str, Any] | bytes, name: str = "plan") -> Plan:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    plan, problems = load_plan(data, name=name, source=f"{name}.json")
    assert plan is not None, problems
    return plan


@pytest.fixture
def mission() -> Plan:
    return load(FIXTURE.read_bytes(), name="release-mission")


@pytest.fixture
def scenario() -> dict[str, str]:
    """Seed 003's worked scenario: the provider attestation failed, the independent test held."""
    states = {
        sid: "verified"
        for sid in (
            "freeze_candidate",
            "functional_eval",
            "security_eval",
            "independent_test",
            "residency_evidence",
        )
    }
    states["provider_attestation"] = "failed"
    return states  # the rest is pending


# ---------------------------------------------------------------------------------------------
# Acceptance: the worked release scenario


def test_scenario_completion_ratio_is_half(mission: Plan, scenario: dict[str, str]) -> None:
    assert completion_ratio(mission, scenario) == 0.5


def test_scenario_frontier_is_risk_approval(mission: Plan, scenario: dict[str, str]) -> None:
    front = frontier(mission, scenario)
    assert list(front.ready) == ["risk_approval"]
    # the failed attestation could be retried, but it is flagged, not silently scheduled
    assert front.retryable == ("provider_attestation",)
    assert front.failed == ("provider_attestation",)
    assert [(r.step, r.retry) for r in front.startable] == [
        ("provider_attestation", True),
        ("risk_approval", False),
    ]
    assert [b.step for b in front.blocked] == ["deploy_canary", "observe_readback", "release"]
    assert str(front.blocked[0].needs[0]) == "clause 1 needs risk_approval=pending"
    assert front.needs_reconcile == () and front.exhausted == () and front.expired == ()


@pytest.mark.parametrize("goal", [None, "release"])
def test_scenario_cheapest_route(mission: Plan, scenario: dict[str, str], goal: str | None) -> None:
    found = routes(mission, scenario, goal)
    assert found, "the release must stay viable through the independent test"
    best = found[0]
    assert best.cost == 5.5
    assert list(best.steps) == RELEASE_ROUTE
    assert "provider_attestation" not in best.all_steps
    assert {"functional_eval", "security_eval", "residency_evidence"} <= set(best.all_steps)
    assert cheapest_route(mission, scenario, goal) == best
    search = route_search(mission, scenario, goal)
    assert search.exact and search.complete and len(search.routes) == 1


def test_scenario_invalidating_the_only_alternative_loses_the_release(
    mission: Plan, scenario: dict[str, str]
) -> None:
    result = impact(mission, scenario, {"independent_test"}, "release")
    assert result.invalidated == ("independent_test",)
    assert result.reopened == ("independent_test", "residency_evidence")
    assert result.impossible == (
        "residency_evidence",
        "risk_approval",
        "deploy_canary",
        "observe_readback",
        "release",
    )
    assert not result.goal_viable
    assert result.cheapest_cost_before == 5.5
    assert result.cheapest_cost_after is None and result.route_after is None
    assert not impact(mission, scenario, {"independent_test"}).goal_viable  # whole plan too


def test_scenario_cone_stops_at_a_shielded_or_clause(
    mission: Plan, scenario: dict[str, str]
) -> None:
    states = {**scenario, "provider_attestation": "verified"}
    result = impact(mission, states, {"independent_test"}, "release")
    assert result.reopened == ("independent_test",)
    assert result.impossible == ()
    assert result.goal_viable
    assert result.cheapest_cost_after == 5.5
    assert result.route_after is not None
    assert list(result.route_after.steps) == RELEASE_ROUTE
    after = invalidated_states(mission, states, {"independent_test"})
    assert after["residency_evidence"] == "verified"
    assert after["independent_test"] == "failed"


def test_scenario_blocked_explanation_reads_exactly(
    mission: Plan, scenario: dict[str, str]
) -> None:
    states = {**scenario, "independent_test": "pending", "residency_evidence": "pending"}
    blocked = frontier(mission, states).blocked_step("residency_evidence")
    assert blocked is not None
    assert [str(n) for n in blocked.needs] == [
        "clause 1 needs one of [provider_attestation=failed, independent_test=pending]"
    ]
    assert str(blocked) == (
        "residency_evidence: clause 1 needs one of "
        "[provider_attestation=failed, independent_test=pending]"
    )
    assert frontier(mission, states).ready == ("independent_test",)


# ---------------------------------------------------------------------------------------------
# Semantics the brief left open (documented in gitaudit/mission/__init__.py)


def test_clause_need_rendering() -> None:
    assert str(ClauseNeed(2, (("a", "failed"), ("b", "pending")))) == (
        "clause 2 needs one of [a=failed, b=pending]"
    )
    assert str(ClauseNeed(1, (("deploy_canary", "pending"),))) == (
        "clause 1 needs deploy_canary=pending"
    )
    assert str(BlockedStep("x", "pending", (ClauseNeed(1, (("a", "unknown"),)),))) == (
        "x: clause 1 needs a=unknown"
    )


def test_frontier_partitions_states(mission: Plan) -> None:
    states = {
        "freeze_candidate": "verified",
        "functional_eval": "expired",
        "security_eval": "unknown",
        "provider_attestation": "exhausted",
        "independent_test": "running",  # unrecognised: pending
    }
    front = frontier(mission, states)
    assert front.verified == ("freeze_candidate",)
    assert front.ready == ("functional_eval", "independent_test")
    assert front.expired == ("functional_eval",)
    assert front.needs_reconcile == ("security_eval",)
    assert front.exhausted == ("provider_attestation",)
    assert front.startable[0].state == "expired"
    blocked = front.blocked_step("risk_approval")
    assert blocked is not None
    assert [str(n) for n in blocked.needs] == [
        "clause 1 needs functional_eval=expired",
        "clause 2 needs security_eval=unknown",
        "clause 3 needs residency_evidence=pending",
    ]


def test_failed_step_with_unsatisfied_clause_is_blocked_not_retryable(mission: Plan) -> None:
    front = frontier(mission, {"risk_approval": "failed"})
    assert front.failed == ("risk_approval",)
    assert front.retryable == ()
    blocked = front.blocked_step("risk_approval")
    assert blocked is not None and blocked.state == "failed"


def test_expired_plans_like_pending(mission: Plan, scenario: dict[str, str]) -> None:
    states = {**scenario, "functional_eval": "expired"}
    best = cheapest_route(mission, states, "release")
    assert best is not None
    assert best.steps == ("functional_eval", *RELEASE_ROUTE)
    assert best.cost == 7.5


def test_unusable_steps_never_appear_in_routes(mission: Plan, scenario: dict[str, str]) -> None:
    for state in ("failed", "unknown", "exhausted"):
        states = {**scenario, "deploy_canary": state}
        assert routes(mission, states, "release") == []
        assert not goal_viable(mission, states, "release")
    # an unusable alternative is fine while another one carries the clause
    assert routes(mission, scenario, "residency_evidence") == [
        Route(
            steps=(),
            cost=0.0,
            all_steps=("freeze_candidate", "independent_test", "residency_evidence"),
        )
    ]


def test_from_scratch_enumerates_both_residency_routes(mission: Plan) -> None:
    search = route_search(mission, {}, limit=None)
    assert search.complete and search.exact
    assert [r.cost for r in search.routes] == [12.5, 14.0]
    assert "provider_attestation" in search.routes[0].steps
    assert "independent_test" in search.routes[1].steps
    assert len(routes(mission, {}, limit=1)) == 1
    assert not route_search(mission, {}, limit=1).complete


def test_completion_ratio_counts_only_verified(mission: Plan) -> None:
    assert completion_ratio(mission, {}) == 0.0
    assert completion_ratio(mission, {"release": "expired", "freeze_candidate": "verified"}) == 0.1


def test_unknown_goal_and_steps_are_errors(mission: Plan) -> None:
    with pytest.raises(ValueError, match="unknown goal"):
        routes(mission, {}, "nope")
    with pytest.raises(ValueError, match="unknown step"):
        impact(mission, {}, {"nope"})
    with pytest.raises(ValueError, match="limit"):
        routes(mission, {}, limit=0)


def test_uncovered_mandatory_requirement_makes_the_whole_plan_non_viable() -> None:
    plan = load(
        {
            "requirements": [
                {"id": "R1", "description": "covered"},
                {"id": "R2", "description": "nobody covers this"},
                {"id": "R3", "description": "optional", "priority": "may"},
            ],
            "steps": [{"id": "a", "covers": ["R1"], "verify": [{"type": "run", "argv": ["true"]}]}],
        }
    )
    assert routes(plan, {}) == []
    assert [r.steps for r in routes(plan, {}, "a")] == [("a",)]


def test_requirement_picks_the_cheaper_optional_cover() -> None:
    check = [{"type": "run", "argv": ["true"]}]
    plan = load(
        {
            "requirements": [{"id": "R", "description": "r"}],
            "steps": [
                {"id": "base", "verify": check, "cost": 1},
                {"id": "x", "depends_on": ["base"], "covers": ["R"], "verify": check, "cost": 4},
                {"id": "y", "depends_on": ["base"], "covers": ["R"], "verify": check, "cost": 2},
                {"id": "top", "depends_on": [{"any_of": ["x", "y"]}], "verify": check},
            ],
        }
    )
    assert [(r.steps, r.cost) for r in routes(plan, {})] == [
        (("base", "y", "top"), 4.0),
        (("base", "x", "top"), 6.0),
    ]


def test_impact_paths_uses_inputs_and_treats_no_inputs_as_whole_tree() -> None:
    check = [{"type": "run", "argv": ["true"]}]
    plan = load(
        {
            "steps": [
                {"id": "docs", "inputs": ["docs/**/*.md"], "verify": check},
                {"id": "code", "inputs": ["src/**"], "verify": check},
                {"id": "all", "verify": check},
                {
                    "id": "ship",
                    "depends_on": ["code", {"any_of": ["docs", "all"]}],
                    "inputs": ["VERSION"],
                    "verify": check,
                },
            ]
        }
    )
    assert steps_for_paths(plan, []) == ()
    assert steps_for_paths(plan, ["docs/index.md"]) == ("docs", "all")
    assert steps_for_paths(plan, ["./src/a/b.py"]) == ("code", "all")
    assert steps_for_paths(plan, ["VERSION"]) == ("all", "ship")
    states = dict.fromkeys(("docs", "code", "all", "ship"), "verified")
    result = impact_paths(plan, ["docs/guide/intro.md"], states)
    assert not result.refuted
    assert result.invalidated == ("docs", "all")
    # ship keeps nothing verified in its OR clause, so it reopens; stale steps can be re-run
    assert result.reopened == ("docs", "all", "ship")
    assert result.impossible == ()
    assert result.goal_viable
    # required: code (still verified) and ship; the OR clause needs one of the equal-cost docs, all
    assert result.cheapest_cost_after == 2.0
    assert result.route_after is not None and len(result.route_after.steps) == 2


def test_budget_exhaustion_degrades_to_a_valid_greedy_route() -> None:
    plan, states = layered_plan(1)
    goal = next(s.id for s in reversed(plan.steps) if goal_viable(plan, states, s.id))
    search = route_search(plan, states, goal, max_work=5)
    assert not search.exact and not search.complete
    assert len(search.routes) == 1
    assert_valid_route(plan, states, goal, search.routes[0])
    exact = cheapest_route(plan, states, goal)
    assert exact is not None and exact.cost <= search.routes[0].cost


def test_cyclic_plan_terminates_and_ignores_back_edges() -> None:
    plan = load(
        {
            "steps": [
                {"id": "a", "depends_on": ["b"], "verify": CHECK},
                {"id": "b", "depends_on": [{"any_of": ["a", "c"]}], "verify": CHECK},
                {"id": "c", "verify": CHECK},
            ]
        }
    )
    assert frontier(plan, {}).ready == ("c",)
    # a -> b is a back edge in topological order (a comes first), so a has no way in
    assert routes(plan, {}, "a") == []
    assert [r.steps for r in routes(plan, {}, "b")] == [("c", "b")]
    assert impact(plan, dict.fromkeys("abc", "verified"), {"c"}).reopened == ("c",)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src/**/x.py", "src/x.py", True),
        ("src/**/x.py", "src/a/b/x.py", True),
        ("src/**/x.py", "srcx.py", False),
        ("**/*.md", "README.md", True),
        ("**/*.md", "docs/a/b.md", True),
        ("docs/*.md", "docs/a.md", True),
        ("docs/*.md", "docs/a.txt", False),
        ("src/**", "src/a/b.py", True),
        ("src/**", "lib/a.py", False),
        ("data/[ab].csv", "data/a.csv", True),
        ("data/[ab].csv", "data/c.csv", False),
        ("./out/*.json", "out/model.json", True),
        ("VERSION", "VERSION", True),
        ("VERSION", "docs/VERSION", False),
        ("docs", "docs/a/b.md", True),
        ("docs", "docsx/a.md", False),
    ],
)
def test_matches_input(pattern: str, path: str, expected: bool) -> None:
    assert matches_input(pattern, path) is expected


# ---------------------------------------------------------------------------------------------
# Brute force on small random AND/OR plans

CHECK = [{"type": "run", "argv": ["true"]}]
UNUSABLE = {"failed", "unknown", "exhausted"}
COSTS = [0, 0.5, 1, 1.5, 2, 3, 5]


@st.composite
def small_missions(draw: st.DrawFn) -> tuple[Plan, dict[str, str], str | None]:
    n = draw(st.integers(1, 7))
    ids = [f"s{i}" for i in range(n)]
    steps: list[dict[str, Any]] = []
    for i, sid in enumerate(ids):
        clauses: list[Any] = []
        if i:
            for _ in range(draw(st.integers(0, 3))):
                alts = draw(st.lists(st.sampled_from(ids[:i]), min_size=1, max_size=3, unique=True))
                if len(alts) == 1 and not draw(st.booleans()):
                    clauses.append(alts[0])
                else:
                    clauses.append({"any_of": alts})
        steps.append(
            {
                "id": sid,
                "depends_on": clauses,
                "cost": draw(st.sampled_from(COSTS)),
                "covers": draw(st.lists(st.sampled_from(["R1", "R2", "R3"]), unique=True)),
                "verify": CHECK,
            }
        )
    requirements = [
        {
            "id": rid,
            "description": rid,
            "priority": draw(st.sampled_from(["must", "should", "may"])),
        }
        for rid in ("R1", "R2", "R3")
    ]
    states = {
        sid: draw(st.sampled_from([*STATES, "pending", "pending", "verified", "running"]))
        for sid in ids
    }
    goal = draw(st.none() | st.sampled_from(ids))
    return load({"requirements": requirements, "steps": steps}), states, goal


def norm(state: str | None) -> str:
    return state if state in STATES else "pending"


def brute_valid_routes(
    plan: Plan, states: Mapping[str, str], goal: str | None
) -> dict[frozenset[str], float]:
    """Every valid remaining set, straight from the definition, by trying all subsets."""
    state = {s.id: norm(states.get(s.id)) for s in plan.steps}
    verified = {sid for sid, st_ in state.items() if st_ == "verified"}
    usable = [sid for sid, st_ in state.items() if st_ != "verified" and st_ not in UNUSABLE]
    if goal is None:
        needed = set(state) - optional_steps(plan)
        covers = [
            {s.id for s in plan.covering_steps(r.id)} for r in plan.requirements if r.mandatory
        ]
    else:
        needed, covers = {goal}, []
    cost = {s.id: s.cost for s in plan.steps}
    valid: dict[frozenset[str], float] = {}
    for size in range(len(usable) + 1):
        for combo in itertools.combinations(usable, size):
            have = verified | set(combo)
            if not needed <= have or any(not (c & have) for c in covers):
                continue
            if all(
                any(a in have for a in clause.alternatives)
                for sid in combo
                for clause in (plan.step(sid).depends_on)  # type: ignore[union-attr]
            ):
                valid[frozenset(combo)] = sum(cost[s] for s in combo)
    return valid


def minimal_sets(valid: Mapping[frozenset[str], float]) -> set[frozenset[str]]:
    return {r for r in valid if not any(o < r for o in valid)}


def check_route(plan: Plan, states: Mapping[str, str], goal: str | None, route: Route) -> None:
    valid = brute_valid_routes(plan, states, goal)
    assert frozenset(route.steps) in valid
    assert route.cost == pytest.approx(valid[frozenset(route.steps)])


@settings(max_examples=100, deadline=None)
@given(small_missions())
def test_frontier_never_holds_an_unsatisfied_step(
    case: tuple[Plan, dict[str, str], str | None],
) -> None:
    plan, states, _ = case
    front = frontier(plan, states)
    state = {s.id: norm(states.get(s.id)) for s in plan.steps}

    def satisfied(sid: str) -> bool:
        step = plan.step(sid)
        assert step is not None
        return all(any(state[a] == "verified" for a in c.alternatives) for c in step.depends_on)

    for sid in front.ready:
        assert state[sid] in ("pending", "expired") and satisfied(sid)
    for sid in front.retryable:
        assert state[sid] == "failed" and satisfied(sid)
    for blocked in front.blocked:
        step = plan.step(blocked.step)
        assert step is not None and blocked.needs and not satisfied(blocked.step)
        unsatisfied = [
            i + 1
            for i, c in enumerate(step.depends_on)
            if not any(state[a] == "verified" for a in c.alternatives)
        ]
        assert [n.index for n in blocked.needs] == unsatisfied
    groups = [
        front.verified,
        front.ready,
        front.retryable,
        tuple(b.step for b in front.blocked),
        front.needs_reconcile,
        front.exhausted,
    ]
    flat = [sid for group in groups for sid in group]
    assert sorted(flat) == sorted(state)  # a partition of the plan


@settings(max_examples=100, deadline=None)
@given(small_missions())
def test_routes_agree_with_brute_force(case: tuple[Plan, dict[str, str], str | None]) -> None:
    plan, states, goal = case
    valid = brute_valid_routes(plan, states, goal)
    search = route_search(plan, states, goal, limit=None)
    found = list(search.routes)
    assert search.exact
    if not valid:
        assert found == [] and not goal_viable(plan, states, goal)
        return
    assert goal_viable(plan, states, goal)
    # every route is valid, and the first is the cheapest of all subsets
    for route in found:
        check_route(plan, states, goal, route)
        assert not set(route.steps) & {s for s in states if norm(states[s]) == "verified"}
    assert found[0].cost == pytest.approx(min(valid.values()))
    best = cheapest_route(plan, states, goal)
    assert best is not None and best.cost == pytest.approx(found[0].cost)
    # no returned route dominates another; unlimited enumeration is exactly the minimal sets
    sets = [frozenset(r.steps) for r in found]
    for a, b in itertools.permutations(range(len(found)), 2):
        assert not (sets[a] <= sets[b] and found[a].cost <= found[b].cost)
    assert set(sets) == minimal_sets(valid)
    assert search.complete
    # sorted cheapest first, then fewer steps, then lexicographically
    keys = [(r.cost, len(r.steps), r.steps) for r in found]
    assert keys == sorted(keys)
    # a limit keeps a prefix-quality answer: the cheapest route and valid, undominated others
    limited = routes(plan, states, goal, limit=2)
    assert limited and limited[0].cost == pytest.approx(found[0].cost)
    assert {frozenset(r.steps) for r in limited} <= set(sets)


def brute_reopened(plan: Plan, states: Mapping[str, str], invalidate: set[str]) -> set[str]:
    """The greatest self-supporting subset of the surviving verified steps, by enumeration."""
    state = {s.id: norm(states.get(s.id)) for s in plan.steps}
    verified = {sid for sid, st_ in state.items() if st_ == "verified"}
    survivors = sorted(verified - invalidate)

    def supported(keep: set[str]) -> bool:
        for sid in keep:
            step = plan.step(sid)
            assert step is not None
            for clause in step.depends_on:
                alts = set(clause.alternatives)
                if alts & verified and not alts & keep:
                    return False
        return True

    best: set[str] = set()
    for size in range(len(survivors), -1, -1):
        for combo in itertools.combinations(survivors, size):
            if supported(set(combo)):
                best = set(combo)
                break
        else:
            continue
        break
    return verified - best


@settings(max_examples=100, deadline=None)
@given(small_missions(), st.data())
def test_impact_agrees_with_brute_force(
    case: tuple[Plan, dict[str, str], str | None], data: st.DataObject
) -> None:
    plan, states, goal = case
    ids = [s.id for s in plan.steps]
    invalidate = set(data.draw(st.lists(st.sampled_from(ids), max_size=3, unique=True)))
    refuted = data.draw(st.booleans())
    result = impact(plan, states, invalidate, goal, refuted=refuted)
    reopened = brute_reopened(plan, states, invalidate)
    assert set(result.reopened) == reopened
    # the states after, from the definition, and viability by brute force on them
    after = {s.id: norm(states.get(s.id)) for s in plan.steps}
    for sid in reopened:
        after[sid] = "pending"
    for sid in invalidate:
        if after[sid] not in UNUSABLE:
            after[sid] = "failed" if refuted else "pending"
    assert invalidated_states(plan, states, invalidate, refuted=refuted) == after
    valid_after = brute_valid_routes(plan, after, goal)
    assert result.goal_viable == bool(valid_after)
    if valid_after:
        assert result.cheapest_cost_after == pytest.approx(min(valid_after.values()))
    else:
        assert result.cheapest_cost_after is None
    # impossible: not invalidated, was verified or viable, now neither
    for sid in ids:
        was = bool(brute_valid_routes(plan, states, sid))
        now = bool(brute_valid_routes(plan, after, sid))
        expected = sid not in invalidate and was and not now
        assert (sid in result.impossible) == expected, sid


# ---------------------------------------------------------------------------------------------
# Performance sanity (not timed): a 300-step layered AND/OR plan


def layered_plan(seed: int, layers: int = 15, width: int = 20) -> tuple[Plan, dict[str, str]]:
    rng = random.Random(seed)
    by_layer: list[list[str]] = []
    steps: list[dict[str, Any]] = []
    for layer in range(layers):
        ids = [f"l{layer}-{w}" for w in range(width)]
        for sid in ids:
            clauses: list[Any] = []
            if layer:
                pool = by_layer[-1] + (by_layer[-2] if layer > 1 else [])
                for _ in range(rng.randint(1, 3)):
                    if rng.random() < 0.35:
                        clauses.append({"any_of": rng.sample(pool, rng.randint(2, 3))})
                    else:
                        clauses.append(rng.choice(pool))
            steps.append(
                {
                    "id": sid,
                    "depends_on": clauses,
                    "cost": rng.choice(COSTS[1:]),
                    "covers": [f"R{rng.randrange(5)}"] if rng.random() < 0.2 else [],
                    "verify": CHECK,
                }
            )
        by_layer.append(ids)
    requirements = [{"id": f"R{i}", "description": "r"} for i in range(5)]
    plan = load({"requirements": requirements, "steps": steps}, name=f"layered-{seed}")
    states = {sid: "verified" for sid in by_layer[0] if rng.random() < 0.8}
    # fail some optional steps, but only where the whole plan stays viable
    for sid in rng.sample(sorted(optional_steps(plan)), 20):
        trial = {**states, sid: rng.choice(["failed", "unknown", "exhausted", "expired"])}
        if whole_plan_viable(plan, trial):
            states = trial
    return plan, states


def whole_plan_viable(plan: Plan, states: Mapping[str, str]) -> bool:
    """Least fixpoint: a step is viable when verified, or usable with a viable alternative in
    every clause; the whole plan needs its required steps and a cover per requirement."""
    state = {s.id: norm(states.get(s.id)) for s in plan.steps}
    viable = {sid for sid, st_ in state.items() if st_ == "verified"}
    changed = True
    while changed:
        changed = False
        for step in plan.steps:
            if step.id in viable or state[step.id] in UNUSABLE:
                continue
            if all(set(c.alternatives) & viable for c in step.depends_on):
                viable.add(step.id)
                changed = True
    required = set(state) - optional_steps(plan)
    covered = all(
        {s.id for s in plan.covering_steps(r.id)} & viable for r in plan.requirements if r.mandatory
    )
    return required <= viable and covered


def assert_valid_route(
    plan: Plan, states: Mapping[str, str], goal: str | None, route: Route
) -> None:
    state = {s.id: norm(states.get(s.id)) for s in plan.steps}
    have = {sid for sid, st_ in state.items() if st_ == "verified"} | set(route.steps)
    for sid in route.steps:
        assert state[sid] not in UNUSABLE and state[sid] != "verified"
        step = plan.step(sid)
        assert step is not None
        assert all(any(a in have for a in c.alternatives) for c in step.depends_on)
    if goal is None:
        assert set(state) - optional_steps(plan) <= have
        for req in plan.requirements:
            assert {s.id for s in plan.covering_steps(req.id)} & have
    else:
        assert goal in have
    cost = {s.id: s.cost for s in plan.steps}
    assert route.cost == pytest.approx(sum(cost[s] for s in route.steps))


@pytest.mark.parametrize("seed", range(3))
def test_300_step_plan_cheapest_route_is_valid(seed: int) -> None:
    plan, states = layered_plan(seed)
    assert len(plan.steps) == 300
    assert goal_viable(plan, states) == whole_plan_viable(plan, states)
    started = time.perf_counter()
    for goal in (None, plan.steps[-1].id):
        best = cheapest_route(plan, states, goal)
        if best is None:
            assert goal is not None and not goal_viable(plan, states, goal)
            continue
        assert_valid_route(plan, states, goal, best)
        found = routes(plan, states, goal)
        assert found and found[0].cost == pytest.approx(best.cost)
        for route in found:
            assert_valid_route(plan, states, goal, route)
        sets = [frozenset(r.steps) for r in found]
        assert len(set(sets)) == len(sets)
        assert not any(a < b for a in sets for b in sets)
    assert time.perf_counter() - started < 30  # generous: a sanity bound, not a benchmark
