"""Shared pieces of the command line: options, output, and the repository handle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperOption

from gitaudit.cli import grammar
from gitaudit.cli.context import repo_here, signer_for
from gitaudit.cli.output import emit_json, say, warn

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _flag_type(self: Any, ctx: Any) -> str | None:
    """typer's help shows every option's type, so flags read ``--json <bool>`` as if they took
    a value; a flag shows none, as in git's own help."""
    if getattr(self, "is_flag", False):
        return None
    return _typed(self, ctx) if _typed is not None else None


_typed = getattr(TyperOption, "display_type_rich", None)
if _typed is not None:  # the typer versions that show types in help
    TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]


def typer_param(param: grammar.Param) -> Any:
    """The typer parameter of a declaration in :mod:`gitaudit.cli.grammar`."""
    if param.positional:
        return typer.Argument(help=param.help)
    return typer.Option(*param.names, help=param.help, min=param.minimum)


PlanOpt = Annotated[str | None, typer_param(grammar.PLAN)]
JsonOpt = Annotated[bool, typer_param(grammar.JSON)]
ForRefOpt = Annotated[str | None, typer_param(grammar.FOR_REF)]


def exit_with(code: int) -> None:
    raise typer.Exit(code)


KeyOpt = Annotated[Path | None, typer_param(grammar.KEY)]


__all__ = ["emit_json", "repo_here", "say", "signer_for", "warn"]
