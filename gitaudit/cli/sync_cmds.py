"""`git audit sync`: bring other clones' evidence and seals in from the remotes."""

from __future__ import annotations

from typing import Annotated

import typer

from gitaudit.cli.common import JsonOpt, KeyOpt, emit_json, repo_here, say
from gitaudit.cli.context import signer_for
from gitaudit.crypto.signers import Signer
from gitaudit.errors import KeyMaterialError, UsageError
from gitaudit.hooks.install import configure_fetch
from gitaudit.ledger.sync import sync


def sync_cmd(
    remote: Annotated[
        str | None, typer.Argument(help="The remote to sync with (default: every remote).")
    ] = None,
    take_remote_plans: Annotated[
        bool,
        typer.Option(
            "--take-remote-plans",
            help="When refs/audit/plans diverged from the remote's, take the remote's (verified "
            "first) and drop the local-only seals (a sealer's key decides: --key); the plan "
            "files are left as they are, reseal them on top.",
        ),
    ] = False,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch the remotes' audit refs into refs/gitaudit/remotes/<remote>/audit/*, adopt a plans
    ref that is ahead and verifies, and fast-forward local runs refs that are behind (each
    fetched run verified first). Diverged runs are replayed by `git audit push`."""
    repo = repo_here()
    remotes = [str(r.name) for r in repo.git.remotes]
    if remote is not None and remote not in remotes:
        raise UsageError(
            f"no remote named {remote!r}",
            hint=f"remotes: {', '.join(remotes)}" if remotes else "add one: `git remote add`",
        )
    if not remotes:
        raise UsageError("this repository has no remotes", hint="add one: `git remote add`")
    for setup in configure_fetch(repo):
        if setup.done != "current":
            say(f"{setup.what}: {setup.done}")
    signer: Signer | None = None
    if take_remote_plans:  # dropping seals is a sealer's decision (checked when seals drop)
        try:
            signer = signer_for(repo, key)
        except KeyMaterialError:
            if key is not None:
                raise
            signer = None  # _take_plans says what is missing, if seals would be dropped
    report = {}
    for name in [remote] if remote else remotes:
        actions = sync(repo, name, take_remote_plans=take_remote_plans, signer=signer)
        report[name] = [{"ref": a.ref, "action": a.action} for a in actions]
        if not as_json:
            for action in actions:
                say(f"{name}: {action.ref}: {action.action}")
    if as_json:
        emit_json({"remotes": report})
