"""`git audit plan export --format pddl`: an independent optimal planner (Fast Downward, through
the Unified Planning framework, both from PyPI) solves the exported task, and its optimal plan
cost equals the cheapest remaining cost of `git audit route`: on seed 003's release scenario
(with real evidence) and on random AND/OR plans."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import pytest
import unified_planning.shortcuts as up
from unified_planning.engines import PlanGenerationResultStatus
from unified_planning.io import PDDLReader

from gitaudit.mission import route_search
from gitaudit.mission.pddl import export
from gitaudit.plan.model import Plan
from tests.gitrepo import GitRepo, audit
from tests.test_mission import FIXTURE, load
from tests.test_mission_cli import release_repo

up.get_environment().credits_stream = None
COSTS = [0, 0.5, 1, 1.5, 2, 2.5, 3, 5]


def solve(domain: Path, problem: Path) -> int | None:
    """The optimal total-cost of the task (in the problem's scaled units), or None when the
    planner proves it unsolvable."""
    task = PDDLReader().parse_problem(str(domain), str(problem))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "cannot establish whether ... can solve this problem"
        with up.OneshotPlanner(name="fast-downward-opt") as planner:
            result = planner.solve(task)
    if result.status in (
        PlanGenerationResultStatus.UNSOLVABLE_PROVEN,
        PlanGenerationResultStatus.UNSOLVABLE_INCOMPLETELY,
    ):
        return None
    assert result.status == PlanGenerationResultStatus.SOLVED_OPTIMALLY, result
    assert result.plan is not None
    cost_of = task.fluent("cost")
    total = 0
    for action in result.plan.actions:
        if action.action.name in ("verify", "verify-unconditional"):
            step = action.actual_parameters[0]
            total += task.initial_value(cost_of(step)).constant_value()
    return int(total)


def planner_cost(tmp: Path, plan: Plan, states: dict[str, str], goal: str | None) -> float | None:
    task = export(plan, states, goal)
    assert task.exact
    domain, problem = tmp / "domain.pddl", tmp / "problem.pddl"
    domain.write_text(task.domain)
    problem.write_text(task.problem)
    cost = solve(domain, problem)
    return None if cost is None else cost / task.scale


def route_cost(plan: Plan, states: dict[str, str], goal: str | None) -> float | None:
    search = route_search(plan, states, goal, 1)
    assert search.exact
    return search.routes[0].cost if search.routes else None


def test_seed_003_release_scenario_end_to_end(repo: GitRepo, tmp_path: Path) -> None:
    release_repo(repo)
    out = tmp_path / "export"
    result = audit(repo.path, "plan", "export", "--format", "pddl", "--output", str(out))
    assert result.code == 0, result.err
    assert "release: wrote" in result.out and "(costs x10)" in result.out
    problem = (out / "release.problem.pddl").read_text()
    assert "(verified s-independent_test)" in problem
    assert "(usable s-provider_attestation)" not in problem  # it failed: unusable
    route = audit(repo.path, "route", "--json").json()["plans"][0]
    cost = solve(out / "release.domain.pddl", out / "release.problem.pddl")
    assert cost is not None and cost / 10 == route["routes"][0]["cost"] == 5.5
    # one step as the goal
    audit(repo.path, "plan", "export", "--goal", "deploy_canary", "-o", str(out))
    goal_route = audit(repo.path, "route", "--goal", "deploy_canary", "--json").json()
    cost = solve(out / "release.domain.pddl", out / "release.problem.pddl")
    assert cost is not None and cost / 10 == goal_route["plans"][0]["routes"][0]["cost"] == 3.0


def test_seed_003_from_scratch_and_after_losing_the_probe(tmp_path: Path) -> None:
    plan = load(FIXTURE.read_bytes(), name="release-mission")
    assert planner_cost(tmp_path, plan, {}, None) == route_cost(plan, {}, None) == 12.5
    lost = {"provider_attestation": "failed", "independent_test": "exhausted"}
    assert route_cost(plan, lost, None) is None
    assert planner_cost(tmp_path, plan, lost, None) is None


def random_plan(rng: random.Random, n: int) -> tuple[Plan, dict[str, str], str | None]:
    ids = [f"step-{i}" for i in range(n)]
    steps: list[dict[str, Any]] = []
    for i, sid in enumerate(ids):
        clauses: list[Any] = []
        for _ in range(rng.randint(0, 3) if i else 0):
            alts = rng.sample(ids[:i], rng.randint(1, min(3, i)))
            clauses.append(alts[0] if len(alts) == 1 else {"any_of": alts})
        steps.append(
            {
                "id": sid,
                "depends_on": clauses,
                "cost": rng.choice(COSTS),
                "covers": rng.sample(["R1", "R2", "R3"], rng.randint(0, 2)),
                "verify": [{"type": "run", "argv": ["true"]}],
            }
        )
    requirements = [
        {"id": r, "description": r, "priority": rng.choice(["must", "should", "may"])}
        for r in ("R1", "R2", "R3")
    ]
    plan = load({"requirements": requirements, "steps": steps})
    states = {
        sid: rng.choice(["pending", "pending", "verified", "failed", "unknown", "expired"])
        for sid in ids
    }
    goal = rng.choice([None, None, *ids])
    return plan, states, goal


@pytest.mark.parametrize("seed", range(12))
def test_random_plans_agree_with_the_planner(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    plan, states, goal = random_plan(rng, rng.randint(4, 11))
    expected = route_cost(plan, states, goal)
    assert planner_cost(tmp_path, plan, states, goal) == expected, json.dumps(states)


def test_costs_are_scaled_to_integers_and_ids_named() -> None:
    check = [{"type": "run", "argv": ["true"]}]
    plan = load(
        {
            "requirements": [{"id": "R.1", "description": "r"}],
            "steps": [
                {"id": 1, "cost": 0.25, "covers": ["R.1"], "verify": check},
                {"id": 2, "cost": 1, "depends_on": [1], "verify": check},
            ],
        }
    )
    task = export(plan, {})
    assert task.scale == 100 and task.exact
    assert "(= (cost s-1) 25)" in task.problem and "(= (cost s-2) 100)" in task.problem
    assert "r-r_1 - requirement" in task.problem
    assert task.names == {"s-1": "1", "s-2": "2"}
    assert "    (verified s-1)\n" in export(plan, {"1": "verified"}).problem
    with pytest.raises(ValueError, match="unknown goal step"):
        export(plan, {}, "nope")
