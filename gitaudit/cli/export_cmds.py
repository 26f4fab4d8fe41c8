"""`git audit plan export --format pddl`: the plan's AND/OR graph and its state for a planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gitaudit.cli.common import PlanOpt, say
from gitaudit.cli.mission_cmds import plans_with_states
from gitaudit.errors import UsageError
from gitaudit.mission.pddl import export

FORMATS = ("pddl",)


def export_cmd(
    fmt: Annotated[str, typer.Option("--format", "-f", help="Only pddl for now.")] = "pddl",
    plan: PlanOpt = None,
    goal: Annotated[
        str | None,
        typer.Option("--goal", "-g", help="A step (default: the whole plan, as `route`)."),
    ] = None,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Folder for <plan>.domain.pddl, <plan>.problem.pddl."),
    ] = Path("."),
) -> None:
    """Write a PDDL domain and problem for each plan: its AND/OR graph with the current state
    (verified steps as facts, failed, unknown and exhausted ones unusable, costs as action
    costs). An optimal planner's plan cost, divided by the scale the problem names, is the
    cheapest remaining cost `git audit route` reports."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}", hint="use --format pddl")
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {output} is not a folder", hint="name a folder to write into")
    written = []
    for model, verdict in plans_with_states(plan):
        if goal is not None and model.step(goal) is None:
            raise UsageError(
                f"plan {model.name!r} has no step {goal!r}",
                hint=f"steps: {', '.join(model.step_ids)}",
            )
        task = export(model, verdict.states, goal)
        output.mkdir(parents=True, exist_ok=True)
        domain = output / f"{model.name}.domain.pddl"
        problem = output / f"{model.name}.problem.pddl"
        domain.write_text(task.domain)
        problem.write_text(task.problem)
        written.append(model.name)
        say(f"{model.name}: wrote {domain} and {problem} (costs x{task.scale})")
