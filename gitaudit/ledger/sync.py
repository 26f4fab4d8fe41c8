"""Sharing the ledger: bring a remote's audit refs in, and re-parent local runs onto them.

Evidence is recorded on each machine as a linear chain per plan, and servers accept audit refs
only as fast-forwards. When another machine pushed runs first, `git audit push` fetches the
remote's audit refs into a private namespace and replays this machine's new run commits on top
(same trees, same messages, signed again by the local runner key), so nothing is lost and the
push stays a fast-forward. A diverged plans ref is never merged automatically: seals are judged
against their predecessor, so the sealer must fetch and reseal.
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Signer
from gitaudit.errors import LedgerError
from gitaudit.git.call import run_git
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.refs import (
    MIRROR,
    PLANS_REF,
    RUNS_PREFIX,
    cas_update,
    clear_stale_lock,
    fetch_refspec,
    list_refs,
    read_ref,
)


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
    proc = run_git(
        ["fetch", "--refmap=", "--no-tags", remote, fetch_refspec(remote)],
        git_dir=repo.gitdir,
        check=False,
    )
    if proc.code != 0:
        raise LedgerError(f"cannot fetch the audit refs of {remote!r}: {proc.err}")
    return {
        name.removeprefix(prefix).replace("audit/", "refs/audit/", 1): oid
        for name, oid in list_refs(repo.git, prefix).items()
    }


def _local_only(
    git: pygit2.Repository, local: pygit2.Oid, remote: pygit2.Oid
) -> list[pygit2.Commit]:
    base = git.merge_base(local, remote)
    return list(reversed(list(chain.walk(git, local, stop=base, what="runs"))))


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
        # both the old and the new chain descend from the merge base: with the marks lowered to
        # it while the ref moves (under the marks lock), a crash or a concurrent hook marking
        # the old tip can never make the new chain look like a rewind
        base = git.merge_base(local, theirs)
        message = f"gitaudit: replay {len(replayed)} run(s) onto {remote}"
        watermark.rewrite(
            repo.gitdir,
            ref,
            str(base if base is not None else parent),
            str(parent),
            functools.partial(cas_update, git, ref, parent, local, message),
        )
        actions.append(SyncAction(ref, f"rebased {len(replayed)}"))
    for ref in sorted(set(remote_refs) - set(list_refs(git, RUNS_PREFIX)) - {PLANS_REF}):
        if ref.startswith(RUNS_PREFIX):
            cas_update(git, ref, remote_refs[ref], None, "gitaudit: runs from remote")
            actions.append(SyncAction(ref, "remote-only"))
    return actions


# ------------------------------------------------------------------------------------ pushing

ATTEMPTS = 5
# git's words for "the remote moved between our fetch and our push" (client side, or the
# server's compare-and-swap of the ref)
_RACE_REASONS = (
    "fetch first",
    "non-fast-forward",
    "stale info",
    "failed to update ref",
    "failed to lock",
    "cannot lock ref",
    "incorrect old value",
)


@dataclass(frozen=True)
class PushedRef:
    flag: str  # git's porcelain flag: ' ' '+' '-' '*' '=' or '!' (rejected)
    source: str
    target: str
    summary: str  # e.g. "[new branch]", "[rejected] (fetch first)"


@dataclass(frozen=True)
class PushResult:
    code: int  # git push's exit code of the last attempt
    attempts: int
    refs: tuple[PushedRef, ...]  # per ref, as git reported the last attempt
    actions: tuple[SyncAction, ...]  # what reconciling the audit refs did, over all attempts
    messages: str = ""  # git's (and the remote's) messages of the last attempt

    @property
    def refused(self) -> tuple[str, ...]:
        """The refs refused for a reason of their own (not only because the push is atomic),
        including those the server could not lock because they had moved."""
        own = [r.target for r in self.refs if r.flag == "!" and not _only_atomic(r.summary)]
        return tuple(dict.fromkeys([*own, *_LOCK_FAILED.findall(self.messages)]))

    @property
    def lost_race(self) -> bool:
        """Only audit run refs were refused, each because the remote had moved between our
        fetch and our push: fetching and replaying again will help."""
        if self.code == 0 or not self.refused or "hook declined" in self.messages:
            return False
        moved = set(_LOCK_FAILED.findall(self.messages))
        reasons = {r.target: r.summary for r in self.refs}
        return all(
            ref.startswith(RUNS_PREFIX) and (ref in moved or _race_reason(reasons.get(ref, "")))
            for ref in self.refused
        )


def _only_atomic(summary: str) -> bool:
    return "atomic push failed" in summary or "atomic transaction failed" in summary


def _race_reason(summary: str) -> bool:
    return any(w in summary for w in _RACE_REASONS)


_LOCK_FAILED = re.compile(r"cannot lock ref '([^']+)': is at [0-9a-f]+ but expected")


def _porcelain(stdout: str) -> tuple[PushedRef, ...]:
    out = []
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1 and ":" in parts[1]:
            source, _, target = parts[1].partition(":")
            out.append(PushedRef(parts[0], source, target, parts[2]))
    return tuple(out)


def push(
    repo: Repo,
    remote: str,
    specs: list[str],
    signer: Signer | None,
    *,
    attempts: int = ATTEMPTS,
    on_retry: Callable[[int, PushResult], None] | None = None,
) -> PushResult:
    """Push *specs* with every audit ref in one atomic push. When another machine wins the race
    for a shared runs ref between our fetch and our push, fetch and replay again, and retry (up
    to *attempts* pushes, with a short jittered back-off). A refusal for any other reason (the
    server's hook, a branch that is behind) is returned at once."""
    actions: list[SyncAction] = []
    result = PushResult(1, 0, (), ())
    for attempt in range(1, attempts + 1):
        actions += reconcile_with(repo, remote, signer)
        audit_refs = [PLANS_REF] if read_ref(repo.git, PLANS_REF) else []
        audit_refs += sorted(list_refs(repo.git, RUNS_PREFIX))
        proc = run_git(
            ["push", "--atomic", "--porcelain", remote, *specs, *(f"{r}:{r}" for r in audit_refs)],
            cwd=repo.workdir or repo.gitdir,
            check=False,
        )
        messages = proc.stderr.decode("utf-8", "replace")
        result = PushResult(proc.code, attempt, _porcelain(proc.out), tuple(actions), messages)
        if proc.code == 0 or not result.lost_race or attempt == attempts:
            return result
        if on_retry is not None:
            on_retry(attempt, result)
        # let the winner get out of the way (jitter, not cryptography)
        time.sleep(random.uniform(0.05, 0.25 * attempt))  # noqa: S311
    return result
