"""`git audit status`: the gate, for the work tree or any revision."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from gitaudit.cli import grammar, reading
from gitaudit.cli.common import (
    ForRefOpt,
    JsonOpt,
    PlanOpt,
    emit_json,
    exit_with,
    repo_here,
    typer_param,
)

RevArg = Annotated[str | None, typer_param(grammar.REV)]


def status_cmd(
    rev: RevArg = None, plan: PlanOpt = None, for_ref: ForRefOpt = None, as_json: JsonOpt = False
) -> None:
    """The gate: PASS only if every active plan is sealed, unweakened, covered and proven by
    fresh signed evidence for exactly this tree. Exit 0 PASS, 1 FAIL, 3 UNKNOWN. Runs no check."""
    exit_with(reading.status(rev, plan, as_json, for_ref))


def verify_cmd(as_json: JsonOpt = False) -> None:
    """Verify everything stored: the plans chain and seals, every run commit's signature, chain
    and tree, the agents registry, and that no audit ref moved behind its verified tip.
    Incremental."""
    exit_with(reading.verify(as_json))


def report_cmd(
    rev: RevArg = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="markdown, json, or github: a GitHub Actions job summary (appended to "
            "$GITHUB_STEP_SUMMARY when set) and an annotation per reason.",
        ),
    ] = "markdown",
    for_ref: ForRefOpt = None,
) -> None:
    """A review-ready report for a pull-request comment: verdict, commit and tree, why each step
    failed (failing tests from JUnit artifacts, else the output's tail), fixes worded for a pull
    request, requirement -> step -> evidence tables, the plan graph and changes since the
    previous run."""
    from gitaudit.gate import report

    if fmt not in ("markdown", "json", "github"):
        raise typer.BadParameter("use markdown, json or github", param_hint="--format")
    reading.check_for_ref(for_ref)
    result, doc = report.build(repo_here(), rev, for_ref)
    if fmt == "json":
        emit_json(doc)
    elif fmt == "github":
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(report.markdown(doc) + "\n")
        else:
            for line in report.github_log(report.markdown(doc)):
                typer.echo(line)
        for line in report.github_annotations(doc):
            typer.echo(line)
    else:
        typer.echo(report.markdown(doc))
    exit_with(result.exit_code)
