"""`git audit snapshot`, `snapshots` and `rollback`: the work tree on refs/audit/snapshots/."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from gitaudit.cli.agents_cmds import cwd_prefix
from gitaudit.cli.common import JsonOpt, KeyOpt, emit_json, repo_here, say, warn
from gitaudit.cli.context import signer_for
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, UsageError
from gitaudit.git.repo import Repo
from gitaudit.ledger import snapshots
from gitaudit.ledger.plansref import read_state
from gitaudit.plan.globs import WHOLE_TREE, GlobError, canonical

DEFAULT_NAME = "latest"


def trusted_keys(repo: Repo) -> list[PublicKey]:
    """The keys whose snapshots are trusted: every key of the verified trust set (with the
    signing key, added by the callers)."""
    try:
        return [k.key for k in read_state(repo).trust.keys]
    except GitAuditError:
        return []


def snapshot_cmd(
    name: Annotated[str, typer.Argument(help="The snapshot's name.")] = DEFAULT_NAME,
    note: Annotated[str, typer.Option("--note", "-m", help="Say why.")] = "",
    key: KeyOpt = None,
) -> None:
    """Record the work tree (tracked and untracked files, not ignored ones; modes and links) as
    a signed commit on refs/audit/snapshots/NAME: its tree is the work tree's fingerprint."""
    snapshots.check_name(name)
    repo = repo_here()
    taken = snapshots.take(repo, signer_for(repo, key), name, note, trusted_keys(repo))
    say(f"snapshot {name}: {taken.commit[:12]} (tree {taken.tree[:12]})")
    if taken.unchained:
        warn(snapshots.unchained_note(taken))


def snapshots_cmd(as_json: JsonOpt = False) -> None:
    """The snapshots of this repository, newest version of each name."""
    found = snapshots.listing(repo_here())
    if as_json:
        emit_json(
            {
                "snapshots": [
                    {
                        "name": s.name,
                        "commit": s.commit,
                        "tree": s.tree,
                        "time": s.time,
                        "head": s.head,
                        "versions": s.versions,
                    }
                    for s in found
                ]
            }
        )
        return
    if not found:
        say("no snapshots (`git audit snapshot NAME` takes one)")
    for s in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.time))
        versions = f", {s.versions} versions" if s.versions > 1 else ""
        say(f"{s.name:<20} {s.commit[:12]}  tree {s.tree[:12]}  {when}{versions}")


def rollback_cmd(
    name: Annotated[str | None, typer.Argument(help="The snapshot to go back to.")] = None,
    paths: Annotated[
        list[str] | None,
        typer.Option("--paths", help="Only these paths or globs (repeatable)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Overwrite changes no snapshot holds (the pre-rollback one keeps them; with "
            "--continue or --abort nothing does).",
        ),
    ] = False,
    resume: Annotated[
        bool, typer.Option("--continue", help="Finish an interrupted rollback.")
    ] = False,
    abort: Annotated[bool, typer.Option("--abort", help="Undo an interrupted rollback.")] = False,
    key: KeyOpt = None,
) -> None:
    """Bring the work tree back to a snapshot: changed files restored, files added since
    deleted, within --paths. Never touches .git, ignored files or submodules; refuses to destroy
    changes that no snapshot holds unless --force; `rollback pre-rollback` undoes it."""
    repo = repo_here()
    if resume and abort:
        raise UsageError("--continue and --abort exclude each other")
    signer = signer_for(repo, key)
    trusted = [*trusted_keys(repo), signer.public_key]
    if resume or abort:
        if name is not None or paths:
            raise UsageError(
                "--continue and --abort take no snapshot or paths: the journal has them"
            )
        done = snapshots.resume(repo, trusted, abort=abort, force=force)
    else:
        if name is None:
            raise UsageError("name the snapshot to roll back to", hint="`git audit snapshots`")
        workdir = repo.require_workdir()
        try:
            scope = tuple(dict.fromkeys(canonical(p, cwd_prefix(workdir)) for p in paths or []))
        except GlobError as exc:
            raise UsageError(f"--paths {exc}", hint="give paths inside the work tree") from None
        done = snapshots.rollback(repo, signer, name, trusted, scope or (WHOLE_TREE,), force=force)
    if done.undo is None:
        say(f"the work tree already matches snapshot {done.snapshot.name}; nothing to do")
        return
    applied = done.applied
    say(
        f"rolled back to {done.snapshot.name} ({done.snapshot.commit[:12]}): "
        f"{len(applied.written)} written, {len(applied.deleted)} deleted"
        + ("" if done.scope == (WHOLE_TREE,) else f" within {', '.join(done.scope)}")
    )
    say(f"undo with `git audit rollback {snapshots.UNDO}` ({done.undo[:12]})")
    for line in applied.kept:
        warn(f"left alone: {line}")
    if done.left:
        warn(f"still different from the snapshot: {', '.join(done.left[:10])}")
