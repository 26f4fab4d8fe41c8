"""Sharing the ledger: bring a remote's audit refs in, and re-parent local runs onto them.

Evidence is recorded on each machine as a linear chain per plan, and servers accept audit refs
only as fast-forwards. When another machine pushed runs first, `git audit push` fetches the
remote's audit refs into a private namespace and replays this machine's new run commits on top
(same trees, same messages, signed again by the local runner key), so nothing is lost and the
push stays a fast-forward. A diverged plans ref is never merged automatically: seals are judged
against their predecessor, so the sealer must fetch and reseal.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pygit2

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.keys import Signer
from gitaudit.errors import LedgerError
from gitaudit.ledger import watermark
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.refs import (
    PLANS_REF,
    RUNS_PREFIX,
    cas_update,
    clear_stale_lock,
    git_env,
    list_refs,
    read_ref,
)
from gitaudit.repo import Repo

MIRROR = "refs/gitaudit/remotes"


@dataclass(frozen=True)
class SyncAction:
    ref: str
    action: str  # up-to-date | fast-forwarded | rebased N | remote-only | local-only


def fetch_mirror(repo: Repo, remote: str) -> dict[str, pygit2.Oid]:
    """Fetch the remote's refs/audit/* into refs/gitaudit/remotes/<remote>/audit/*."""
    prefix = f"{MIRROR}/{remote}/"
    mirror = repo.gitdir / MIRROR / remote
    if mirror.is_dir():  # a fetch killed mid-way leaves locks that would block every later one
        for lock in mirror.rglob("*.lock"):
            clear_stale_lock(repo.gitdir, str(lock.relative_to(repo.gitdir))[: -len(".lock")])
    proc = subprocess.run(
        [
            "git",
            f"--git-dir={repo.gitdir}",
            "fetch",
            "--refmap=",
            "--no-tags",
            remote,
            f"+refs/audit/*:{prefix}audit/*",
        ],
        capture_output=True,
        text=True,
        env=git_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise LedgerError(f"cannot fetch the audit refs of {remote!r}: {proc.stderr.strip()}")
    return {
        name.removeprefix(prefix).replace("audit/", "refs/audit/", 1): oid
        for name, oid in list_refs(repo.git, prefix).items()
    }


def _local_only(
    git: pygit2.Repository, local: pygit2.Oid, remote: pygit2.Oid
) -> list[pygit2.Commit]:
    base = git.merge_base(local, remote)
    out: list[pygit2.Commit] = []
    current: pygit2.Oid | None = local
    while current is not None and current != base:
        commit = commit_of(git, current, "run")
        out.append(commit)
        current = commit.parent_ids[0] if commit.parent_ids else None
    out.reverse()
    return out


def reconcile_with(repo: Repo, remote: str, signer: Signer | None) -> list[SyncAction]:
    """Make every local runs ref a descendant of the remote's, replaying local-only runs."""
    remote_refs = fetch_mirror(repo, remote)
    git = repo.git
    actions: list[SyncAction] = []
    local_plans, remote_plans = read_ref(git, PLANS_REF), remote_refs.get(PLANS_REF)
    if local_plans and remote_plans and local_plans != remote_plans:
        if git.descendant_of(remote_plans, local_plans):
            cas_update(git, PLANS_REF, remote_plans, local_plans, "gitaudit: fast-forward plans")
            actions.append(SyncAction(PLANS_REF, "fast-forwarded"))
        elif not git.descendant_of(local_plans, remote_plans):
            raise LedgerError(
                f"{PLANS_REF} has diverged from {remote!r}: both sides sealed changes",
                hint=f"fetch theirs (`git fetch {remote} +refs/audit/plans:refs/audit/plans` after "
                "saving yours), then reseal your plan changes on top",
            )
    for ref, local in sorted(list_refs(git, RUNS_PREFIX).items()):
        theirs = remote_refs.get(ref)
        if theirs is None:
            actions.append(SyncAction(ref, "local-only"))
            continue
        if theirs == local or git.descendant_of(local, theirs):
            actions.append(SyncAction(ref, "up-to-date"))
            continue
        if git.descendant_of(theirs, local):
            cas_update(git, ref, theirs, local, "gitaudit: fast-forward to remote runs")
            actions.append(SyncAction(ref, "fast-forwarded"))
            continue
        if signer is None:
            raise LedgerError(
                f"{ref} has diverged from {remote!r}", hint="a runner key is needed to replay runs"
            )
        parent = theirs
        replayed = _local_only(git, local, theirs)
        for commit in replayed:
            parent = create_signed_commit(
                git, tree=commit.tree_id, parents=[parent], message=commit.message, signer=signer
            )
        # both the old and the new chain descend from the merge base: a crash between moving the
        # ref and resetting the mark can then never look like a rewind
        base = git.merge_base(local, theirs)
        if base is not None:
            watermark.reset(repo.gitdir, ref, seen=str(base))
        cas_update(
            git, ref, parent, local, f"gitaudit: replay {len(replayed)} run(s) onto {remote}"
        )
        watermark.reset(repo.gitdir, ref, seen=str(parent))
        actions.append(SyncAction(ref, f"rebased {len(replayed)}"))
    for ref in sorted(set(remote_refs) - set(list_refs(git, RUNS_PREFIX)) - {PLANS_REF}):
        if ref.startswith(RUNS_PREFIX):
            cas_update(git, ref, remote_refs[ref], None, "gitaudit: runs from remote")
            actions.append(SyncAction(ref, "remote-only"))
    return actions
