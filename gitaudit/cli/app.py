"""The typer application: every command, registered in one place.

Commands parse options, call the core, and print; :func:`gitaudit.cli.main` maps errors to exit
codes.
"""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from gitaudit import __version__
from gitaudit.cli import (
    agent_cmds,
    agents_cmds,
    approval_cmds,
    attest_cmds,
    completion,
    export_cmds,
    gate_cmds,
    keys_cmds,
    mission_cmds,
    plan_cmds,
    request_cmds,
    run_cmds,
    setup_cmds,
    snapshot_cmds,
    sync_cmds,
    trust_cmds,
    watch_cmds,
)
from gitaudit.cli.common import CONTEXT, say

app = typer.Typer(
    name="git-audit",
    help="Make 'done' checkable with nothing but git: sealed plans, signed evidence, one gate.",
    context_settings=CONTEXT,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(plan_cmds.app, name="plan")
app.add_typer(request_cmds.app, name="request")
plan_cmds.app.command("export")(export_cmds.export_cmd)
app.add_typer(keys_cmds.app, name="keys")
app.add_typer(trust_cmds.app, name="trust")
app.command("run")(run_cmds.run_cmd)
app.command("log")(run_cmds.log_cmd)
app.command("show")(run_cmds.show_cmd)
app.command("reconcile")(run_cmds.reconcile_cmd)
app.command("status")(gate_cmds.status_cmd)
app.command("next")(mission_cmds.next_cmd)
app.command("route")(mission_cmds.route_cmd)
app.command("impact")(mission_cmds.impact_cmd)
app.command("verify")(gate_cmds.verify_cmd)
app.command("report")(gate_cmds.report_cmd)
app.command("attest")(attest_cmds.attest_cmd)
app.command("doctor")(setup_cmds.doctor_cmd)
app.command("push")(setup_cmds.push_cmd)
app.command("sync")(sync_cmds.sync_cmd)
app.command("init")(setup_cmds.init_cmd)
app.add_typer(setup_cmds.hooks_app, name="hooks")
app.command("completion")(completion.completion_cmd)
app.add_typer(agent_cmds.app, name="agent")
app.add_typer(agents_cmds.app, name="agents")
app.command("snapshot")(snapshot_cmds.snapshot_cmd)
app.command("snapshots")(snapshot_cmds.snapshots_cmd)
app.command("rollback")(snapshot_cmds.rollback_cmd)
app.command("watch")(watch_cmds.watch_cmd)
app.command("proposals")(approval_cmds.proposals_cmd)
app.command("approve")(approval_cmds.approve_cmd)


def _short_help(group: typer.Typer) -> None:
    """A command's line in its group's listing is its docstring's first paragraph as one
    paragraph: typer's rich listing keeps the docstring's line breaks, which cut sentences
    short at the docstring's width (help of the command itself already joins them)."""
    for info in group.registered_commands:
        doc = inspect.getdoc(info.callback) if info.callback is not None else None
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _short_help(sub.typer_instance)


_short_help(app)


def _version(value: bool) -> None:
    if value:
        say(f"gitaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks for errors.", envvar="GITAUDIT_DEBUG")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """gitaudit: sealed plans, signed evidence runs and a completion gate, all in git.

    ``--debug`` is read by :func:`gitaudit.cli.main` before typer runs; it is declared here so
    that help shows it and typer accepts it."""
