"""The `git audit` command line. The only package that imports typer.

Commands parse options, call the core, and print; the one exception handler below maps every
expected error to its exit code (0 success/PASS, 1 FAIL/error, 2 usage, 3 UNKNOWN).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gitaudit import __version__
from gitaudit.cli import gate_cmds, keys_cmds, plan_cmds, run_cmds, setup_cmds, trust_cmds
from gitaudit.cli.common import CONTEXT, say
from gitaudit.errors import GitAuditError

app = typer.Typer(
    name="git-audit",
    help="Make 'done' checkable with nothing but git: sealed plans, signed evidence, one gate.",
    context_settings=CONTEXT,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(plan_cmds.app, name="plan")
app.add_typer(keys_cmds.app, name="keys")
app.add_typer(trust_cmds.app, name="trust")
app.command("run")(run_cmds.run_cmd)
app.command("log")(run_cmds.log_cmd)
app.command("show")(run_cmds.show_cmd)
app.command("reconcile")(run_cmds.reconcile_cmd)
app.command("status")(gate_cmds.status_cmd)
app.command("verify")(gate_cmds.verify_cmd)
app.command("report")(gate_cmds.report_cmd)
app.command("doctor")(setup_cmds.doctor_cmd)
app.command("push")(setup_cmds.push_cmd)
app.command("init")(setup_cmds.init_cmd)
app.add_typer(setup_cmds.hooks_app, name="hooks")

_state = {"debug": False}


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
    """gitaudit: sealed plans, signed evidence runs and a completion gate, all in git."""
    _state["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``git-audit`` and ``gitaudit``).

    typer handles usage errors itself (exit 2); every expected gitaudit error is caught here and
    printed as one ``error:`` line plus a ``hint:`` line, with the exit code its class carries.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        app(args=args, prog_name="git-audit")
    except GitAuditError as exc:
        if "--debug" in args or _state["debug"]:
            raise
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        sys.exit(int(exc.exit_code))
