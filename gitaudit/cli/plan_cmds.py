"""`git audit plan ...`: validate, show and draw plans."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from gitaudit.cli.common import (
    CONTEXT,
    JsonOpt,
    PlanOpt,
    emit_json,
    exit_with,
    repo_here,
    say,
    warn,
)
from gitaudit.errors import ExitCode
from gitaudit.plan.catalog import CheckedPlan, check_worktree
from gitaudit.plan.graph import render, topological_order
from gitaudit.plan.model import Check, Plan

app = typer.Typer(
    help="Validate, show, draw and seal plans.", context_settings=CONTEXT, no_args_is_help=True
)


@app.command("validate")
def validate_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """Validate plans: JSON, schema, graph, output contracts, coverage and environment.

    Exit 0 when every selected plan is valid, 1 when any is not. Missing required tools are
    reported in their own section: the plan is valid, but the gate will not PASS on this machine.
    """
    checked = check_worktree(repo_here().require_workdir(), plan)
    ok = all(c.report.valid for c in checked)
    if as_json:
        emit_json(
            {
                "valid": ok,
                "plans": [
                    {
                        "plan": c.name,
                        "source": c.file.source,
                        "valid": c.report.valid,
                        "digest": c.digest,
                        "problems": [p.to_json() for p in c.report.problems],
                    }
                    for c in checked
                ],
            }
        )
    else:
        for c in checked:
            _print_report(c)
    exit_with(ExitCode.OK if ok else ExitCode.FAIL)


def _print_report(c: CheckedPlan) -> None:
    report = c.report
    if report.valid:
        say(f"{c.name}: valid ({len(c.plan.steps) if c.plan else 0} steps, contract {c.digest})")
    else:
        say(f"{c.name}: INVALID, {len(report.errors)} problem(s)")
    for p in report.errors:
        say(f"  error   {p.path}: {p.message} [{p.code}]")
        say(f"          fix: {p.hint}")
    for p in report.warnings:
        say(f"  warning {p.path}: {p.message} [{p.code}]")
    if report.environment:
        say("  environment (this machine, not the plan):")
        for p in report.environment:
            say(f"    {p.path}: {p.message} [{p.code}]")
            say(f"      fix: {p.hint}")


def _check_json(check: Check) -> dict[str, Any]:
    return {"type": check.type, "describe": check.describe(), "path": check.json_path}


def _plan_json(c: CheckedPlan, plan: Plan) -> dict[str, Any]:
    order = topological_order(plan)
    return {
        "plan": plan.name,
        "task": plan.task,
        "digest": c.digest,
        "sequential": plan.legacy,
        "requirements": [
            {
                "id": r.id,
                "priority": r.priority,
                "description": r.description,
                "covered_by": [s.id for s in plan.covering_steps(r.id)],
            }
            for r in plan.requirements
        ],
        "required_tools": list(plan.required_tools),
        "steps": [
            {
                "id": s.id,
                "title": s.title,
                "depends_on": [
                    {"any_of": list(cl.alternatives)} if cl.is_any_of else cl.alternatives[0]
                    for cl in s.depends_on
                ],
                "requires_outputs": [{"step": r.step, "name": r.name} for r in s.requires_outputs],
                "covers": list(s.covers),
                "verify": [_check_json(ch) for ch in s.verify],
                "outputs": [
                    {"name": o.name, "verify": [_check_json(ch) for ch in o.checks]}
                    for o in s.outputs
                ],
                "cost": s.cost,
                "max_attempts": s.max_attempts,
                "idempotent": s.idempotent,
                "valid_for": s.valid_for,
            }
            for s in (plan.step(i) for i in order)
            if s is not None
        ],
    }


@app.command("show")
def show_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """Show requirements and their covering steps, steps in dependency order, and the digest."""
    checked = check_worktree(repo_here().require_workdir(), plan)
    docs = []
    for c in checked:
        model = c.require_valid()
        if as_json:
            docs.append(_plan_json(c, model))
            continue
        say(f"plan {model.name}: {model.task or '(no task)'}")
        say(f"  contract {c.digest}" + ("  (legacy sequential plan)" if model.legacy else ""))
        say("  requirements:")
        for r in model.requirements:
            covering = ", ".join(s.id for s in model.covering_steps(r.id)) or "NOT COVERED"
            say(f"    {r.id} [{r.priority}] {r.description}  <- steps {covering}")
        if model.required_tools:
            say(f"  required tools: {', '.join(model.required_tools)}")
        say("  steps (dependency order):")
        for sid in topological_order(model):
            s = model.step(sid)
            assert s is not None
            say(f"    {s.label}")
            if s.depends_on:
                parts = [str(cl) for cl in s.depends_on]
                note = " (implicit: previous step)" if s.implicit_dependencies else ""
                say(f"      depends on: {' AND '.join(parts)}{note}")
            for ref in s.requires_outputs:
                say(f"      requires output: {ref.step}/{ref.name}")
            if s.covers:
                say(f"      covers: {', '.join(s.covers)}")
            for ch in s.verify:
                say(f"      check  {ch.describe()}")
            for o in s.outputs:
                say(f"      output {o.name}:")
                for ch in o.checks:
                    say(f"        check  {ch.describe()}")
        for p in c.report.warnings:
            warn(f"warning: {p.render()}")
    if as_json:
        emit_json({"plans": docs})


GraphFormatOpt = Annotated[
    str, typer.Option("--format", "-f", help="mermaid (renders in pull requests), dot or text.")
]


@app.command("graph")
def graph_cmd(plan: PlanOpt = None, fmt: GraphFormatOpt = "mermaid") -> None:
    """Draw the dependency graph (arrows run from prerequisite to dependant)."""
    if fmt not in ("mermaid", "dot", "text"):
        raise typer.BadParameter(
            f"unknown format {fmt!r}; use mermaid, dot or text", param_hint="--format"
        )
    fmt_lit: Literal["mermaid", "dot", "text"] = fmt  # type: ignore[assignment]
    for c in check_worktree(repo_here().require_workdir(), plan):
        model = c.require_valid()
        out = render(model, fmt_lit)
        if fmt == "text":
            say(f"# {model.name}")
        say(out.rstrip("\n"))
