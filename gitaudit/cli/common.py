"""Shared pieces of the command line: options, output, and the repository handle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gitaudit.cli.context import repo_here, signer_for
from gitaudit.cli.output import emit_json, say, warn

CONTEXT = {"help_option_names": ["-h", "--help"]}

PlanOpt = Annotated[
    str | None,
    typer.Option("--plan", "-p", help="Act on this plan only (default: every active plan)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine-readable JSON document.")]


def exit_with(code: int) -> None:
    raise typer.Exit(code)


KeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--key",
        "-k",
        help="Signing key (an OpenSSH Ed25519 private key, or a .pub held by ssh-agent). "
        "Default: $GITAUDIT_SIGNING_KEY, audit.signingKey, user.signingKey (gpg.format=ssh), "
        "then the gitaudit key directory.",
    ),
]


__all__ = ["emit_json", "repo_here", "say", "signer_for", "warn"]
