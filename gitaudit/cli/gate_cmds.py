"""`git audit status`: the gate, for the work tree or any revision."""

from __future__ import annotations

from typing import Annotated

import typer

from gitaudit.cli.common import JsonOpt, PlanOpt, emit_json, exit_with, repo_here, say
from gitaudit.gate import assess, render_gate

RevArg = Annotated[
    str | None, typer.Argument(help="Judge this commit's tree (default: the work tree).")
]


def status_cmd(rev: RevArg = None, plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """The gate: PASS only if every active plan is sealed, unweakened, covered and proven by
    fresh signed evidence for exactly this tree. Exit 0 PASS, 1 FAIL, 3 UNKNOWN. Runs no check."""
    result = assess(repo_here(), rev, plan=plan)
    if as_json:
        emit_json(result.to_json())
    else:
        for line in render_gate(result):
            say(line)
    exit_with(result.exit_code)


def verify_cmd(as_json: JsonOpt = False) -> None:
    """Verify everything stored: the plans chain and seals, every run commit's signature, chain
    and tree, and that no audit ref moved behind its verified tip. Incremental."""
    from gitaudit.verify import verify_all

    report = verify_all(repo_here())
    if as_json:
        emit_json(report.to_json())
    else:
        total = sum(report.verified.values())
        say(
            f"{'PASS' if report.ok else 'FAIL'}: verified {total} new commit(s) "
            f"in {report.seconds:.2f}s"
        )
        for ref, n in sorted(report.verified.items()):
            say(f"  {ref}: {n} new")
        for problem in report.problems:
            say(f"  problem: {problem}")
    exit_with(0 if report.ok else 1)


def report_cmd(
    rev: RevArg = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="markdown or json.")] = "markdown",
) -> None:
    """A review-ready report for a pull-request comment: verdict, requirement -> step -> evidence
    tables, evidence commit ids, the plan graph (mermaid) and changes since the previous run."""
    from gitaudit import report

    if fmt not in ("markdown", "json"):
        raise typer.BadParameter("use markdown or json", param_hint="--format")
    result, doc = report.build(repo_here(), rev)
    if fmt == "json":
        emit_json(doc)
    else:
        typer.echo(report.markdown(doc))
    exit_with(result.exit_code)
