"""Shared pieces of the command line: options, output, and the repository handle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gitaudit.cli import grammar
from gitaudit.cli.context import repo_here, signer_for
from gitaudit.cli.output import emit_json, say, warn

CONTEXT = {"help_option_names": ["-h", "--help"]}


def typer_param(param: grammar.Param) -> Any:
    """The typer parameter of a declaration in :mod:`gitaudit.cli.grammar`."""
    if param.positional:
        return typer.Argument(help=param.help)
    return typer.Option(*param.names, help=param.help, min=param.minimum)


PlanOpt = Annotated[str | None, typer_param(grammar.PLAN)]
JsonOpt = Annotated[bool, typer_param(grammar.JSON)]


def exit_with(code: int) -> None:
    raise typer.Exit(code)


KeyOpt = Annotated[Path | None, typer_param(grammar.KEY)]


__all__ = ["emit_json", "repo_here", "say", "signer_for", "warn"]
