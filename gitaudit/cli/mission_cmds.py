"""Mission control: `git audit next`, `route` and `impact` (see gitaudit/mission/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from gitaudit.cli.agents_cmds import holders
from gitaudit.cli.common import JsonOpt, PlanOpt, emit_json, repo_here, say
from gitaudit.errors import LedgerError, TrustError, UsageError
from gitaudit.gate.judge import judge
from gitaudit.gate.result import PlanVerdict
from gitaudit.ledger.plansref import read_state
from gitaudit.mission import (
    completion_ratio,
    frontier,
    impact,
    impact_paths,
    route_search,
)
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.model import Plan


def plans_with_states(name: str | None) -> list[tuple[Plan, PlanVerdict]]:
    """Every selected plan of the work tree with the gate's view of its steps."""
    repo = repo_here()
    result = judge(repo, None, plan=name, with_states=True)
    broken = [r for r in result.reasons if r.code != "plans.none"]  # no plan was named: below
    if broken:  # no plan was judged: the plans ref, its trust or its pin is broken
        raise TrustError(broken[0].message, hint=broken[0].hint)
    by_name = {p.name: p for p in result.plans}
    out = []
    for checked in check_worktree(repo.require_workdir(), name):
        plan = checked.require_valid()
        verdict = by_name.get(plan.name)
        if verdict is None:
            continue
        broken = [r for r in verdict.reasons if r.code == "evidence.ledger"]
        if broken:  # the steps' states would be read from a ledger that cannot be read
            raise LedgerError(f"plan {plan.name!r}: {broken[0].message}", hint=broken[0].hint)
        if not verdict.states:
            reason = verdict.reasons[0].message if verdict.reasons else "not judged"
            named = f"plan {plan.name!r}"
            raise UsageError(
                reason if reason.startswith(named) else f"{named}: {reason}",
                hint=verdict.reasons[0].hint if verdict.reasons else None,
            )
        out.append((plan, verdict))
    return out


def next_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """The verified frontier: steps that may start now (every AND clause has a verified
    alternative), then the blocked steps with exactly which clause blocks each."""
    docs = []
    repo = repo_here()
    plans = read_state(repo)
    for model, verdict in plans_with_states(plan):
        f = frontier(model, verdict.states)
        held = holders(repo, plans, model.name)
        doc: dict[str, Any] = {
            "plan": model.name,
            "ready": list(f.ready),
            "retryable": list(f.retryable),
            "needs_reconcile": list(f.needs_reconcile),
            "exhausted": list(f.exhausted),
            "expired": list(f.expired),
            "blocked": [
                {"step": b.step, "state": b.state, "needs": [str(n) for n in b.needs]}
                for b in f.blocked
            ],
            "verified": list(f.verified),
            "claims": {s: {"agent": a, "live": live} for s, (a, live) in sorted(held.items())},
        }
        docs.append(doc)
        if as_json:
            continue
        say(f"{model.name}: {len(f.verified)}/{len(model.steps)} verified")
        for sid in f.ready:
            step = model.step(sid)
            say(
                f"  ready     {sid}"
                + (f": {step.title}" if step and step.title else "")
                + _held(held, sid)
            )
        for sid in f.retryable:
            say(
                f"  retry     {sid} (failed; attempts remain): fix the cause, then "
                f"`git audit run {sid} --plan {model.name}`"
            )
        for sid in f.needs_reconcile:
            say(
                f"  reconcile {sid}: `git audit reconcile {sid} --plan {model.name} "
                "--observed pass|fail` or `--readback`"
            )
        for sid in f.exhausted:
            say(
                f"  exhausted {sid} (no attempts remain): a sealer's `git audit plan "
                f"reset-attempts {sid} --plan {model.name}`, or a reseal"
            )
        for b in f.blocked:
            needs = "; ".join(str(n) for n in b.needs)
            say(f"  blocked   {b.step}: {needs}{_held(held, b.step)}")
    if as_json:
        emit_json({"plans": docs})


def _held(held: dict[str, tuple[str, bool]], step: str) -> str:
    """`  [claimed by AGENT]` (or `[stale claim of AGENT]`) for a claimed step."""
    if step not in held:
        return ""
    agent, live = held[step]
    return f"  [claimed by {agent}]" if live else f"  [stale claim of {agent}: may be taken over]"


def route_cmd(
    plan: PlanOpt = None,
    goal: Annotated[
        str | None,
        typer.Option(
            "--goal", "-g", help="A step (default: everything needed to cover the requirements)."
        ),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="List the non-dominated routes, not only the cheapest.")
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", help="At most this many routes with --all.", min=1)
    ] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The cheapest remaining way to the goal: non-dominated solution subgraphs, cheapest first
    by summed cost (verified steps cost 0; failed, unknown and exhausted steps are unusable),
    with the plain completion ratio beside it (which can mislead)."""
    docs = []
    for model, verdict in plans_with_states(plan):
        if goal is not None and model.step(goal) is None:
            raise UsageError(f"plan {model.name!r} has no step {goal!r}")
        search = route_search(model, verdict.states, goal, limit if show_all else 1)
        ratio = completion_ratio(model, verdict.states)
        routes = [{"cost": r.cost, "steps": list(r.steps)} for r in search.routes]
        retry = [] if routes else _retry_route(model, verdict.states, goal)
        docs.append(
            {
                "plan": model.name,
                "goal": goal,
                "completion_ratio": ratio,
                "viable": bool(routes),
                "exact": search.exact,
                "complete": search.complete,
                "routes": routes,
                "viable_after_retry": bool(retry),
                "retry": retry,
            }
        )
        if as_json:
            continue
        target = f"step {goal}" if goal else "the requirements"
        if not routes:
            say(_no_route(model, verdict.states, target, ratio, retry))
            continue
        best = search.routes[0]
        say(
            f"{model.name}: cheapest remaining cost {best.cost:g} to {target} "
            f"over {{{', '.join(best.steps)}}}"
            f" — completion ratio {ratio:.0%}"
            + ("" if search.exact else " (best found, not proven cheapest)")
        )
        for r in search.routes[1:]:
            say(f"  or cost {r.cost:g} over {{{', '.join(r.steps)}}}")
    if as_json:
        emit_json({"plans": docs})


def _retry_route(model: Plan, states: Mapping[str, str], goal: str | None) -> list[str]:
    """When no route exists from the steps as they stand: the failed steps (attempts remain)
    that a route needs once they are retried, or [] when retrying them does not help either."""
    f = frontier(model, states)
    if not f.failed:
        return []
    relaxed = {sid: ("pending" if sid in f.failed else st) for sid, st in states.items()}
    again = route_search(model, relaxed, goal, 1)
    if not again.routes:
        return []
    return [sid for sid in again.routes[0].steps if sid in f.failed]


def _no_route(
    model: Plan, states: Mapping[str, str], target: str, ratio: float, retry: list[str]
) -> str:
    """Why no route exists, in the words `next` uses for the same states."""
    name = model.name
    if retry:
        return (
            f"{name}: no route from the steps as they stand: {target} "
            f"{'need' if target == 'the requirements' else 'needs'} a retry of "
            f"{', '.join(retry)} (failed; attempts remain) — fix the cause, then "
            f"`git audit run {' '.join(retry)} --plan {name}` ({ratio:.0%} of steps verified)"
        )
    f = frontier(model, states)
    why = []
    if f.exhausted:
        why.append(
            f"exhausted: {', '.join(f.exhausted)} (no attempts remain: a sealer's "
            f"`git audit plan reset-attempts STEP --plan {name}`, or a reseal)"
        )
    if f.needs_reconcile:
        why.append(
            f"unknown outcome: {', '.join(f.needs_reconcile)} (`git audit reconcile STEP "
            f"--plan {name}`)"
        )
    return f"{name}: {target} cannot be reached any more ({ratio:.0%} of steps verified)" + (
        ": " + "; ".join(why) if why else ""
    )


def impact_cmd(
    steps: Annotated[
        list[str] | None, typer.Argument(help="Steps whose evidence would be invalidated.")
    ] = None,
    paths: Annotated[
        list[str] | None, typer.Option("--paths", help="Changed paths (repeatable).")
    ] = None,
    stale: Annotated[
        bool,
        typer.Option(
            "--stale",
            help="Treat the named steps' evidence as stale (they may be re-run), not as refuted.",
        ),
    ] = False,
    plan: PlanOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The repair cone: if these steps' evidence were invalidated (or these paths changed), which
    verified steps reopen, which pending steps become impossible, and whether the goal survives.

    Named steps are treated as refuted (their claim was false: they cannot simply be re-run);
    with --stale, or for --paths, the evidence is only out of date and the steps may run again."""
    if bool(steps) == bool(paths):
        raise UsageError("name steps, or give --paths, not both")
    docs = []
    for model, verdict in plans_with_states(plan):
        if steps:
            missing = [s for s in steps if model.step(s) is None]
            if missing:
                raise UsageError(f"plan {model.name!r} has no step {', '.join(missing)}")
            result = impact(model, verdict.states, set(steps), refuted=not stale)
        else:
            result = impact_paths(model, paths or [], verdict.states)
        docs.append(
            {
                "plan": model.name,
                "invalidated": list(result.invalidated),
                "reopened": list(result.reopened),
                "impossible": list(result.impossible),
                "goal_viable": result.goal_viable,
                "cheapest_cost_before": result.cheapest_cost_before,
                "cheapest_cost_after": result.cheapest_cost_after,
            }
        )
        if as_json:
            continue
        say(f"{model.name}: invalidating {', '.join(result.invalidated) or 'nothing'}")
        say(f"  reopens:    {', '.join(result.reopened) or 'nothing'}")
        say(f"  impossible: {', '.join(result.impossible) or 'nothing'}")
        after = (
            ""
            if result.cheapest_cost_after is None
            else f" (cheapest remaining cost {result.cheapest_cost_after:g})"
        )
        say(f"  goal:       {'still viable' + after if result.goal_viable else 'NOT viable'}")
    if as_json:
        emit_json({"plans": docs})
