"""Sharing the ledger: bring a remote's audit refs in, and re-parent local runs onto them.

Evidence is recorded on each machine as a linear chain per plan, and servers accept audit refs
only as fast-forwards. When another machine pushed runs first, `git audit push` fetches the
remote's audit refs into a private namespace and replays this machine's new run commits on top
(same trees, messages and times, signed again by the local runner key), so nothing is lost and
the push stays a fast-forward. A diverged plans ref is never merged automatically: seals are judged
against their predecessor, so the sealer must fetch and reseal.

Re-signing is vouching, so nothing is re-signed unverified: each local-only run commit must be a
single-parent commit signed by a runner trusted in the verified plans state (the remote's, when
the plans ref is adopted from it), holding a well-formed ``run.json`` for the ref's own plan.
Anything else stops the push with one error naming the commit, and no ref moves: every ref update
is applied only once every replay of the push has been verified and signed.
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from gitaudit import checkpoint
from gitaudit.crypto.commits import create_signed_commit, verify_commit
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, LedgerError
from gitaudit.git.call import run_git
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.plansref import PlansState, read_state
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
from gitaudit.ledger.runs import read_run


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


def _replayable(
    git: pygit2.Repository, state: PlansState, ref: str, commit: pygit2.Commit, root_ok: bool
) -> None:
    """LedgerError unless local-only run *commit* may be re-signed for *ref*: one parent (none
    only for the first commit of a ledger unrelated to the remote's), signed by a runner trusted
    in *state*, and a well-formed run.json for the ref's plan. The signature is checked first:
    nothing an untrusted commit holds is read."""
    where = f"{ref}: local run {str(commit.id)[:12]}"
    refused = "is not replayed; nothing was pushed"
    hint = (
        f"inspect it (`git show {str(commit.id)[:12]}`, `git audit verify`), then reset {ref} "
        "to the last good run before pushing"
    )
    parents = len(commit.parent_ids)
    if parents > 1 or (parents == 0 and not root_ok):
        raise LedgerError(f"{where} has {parents} parents (a run has one) and {refused}", hint=hint)
    try:
        verify_commit(git, commit.id, state.trust.with_role("runner"))
    except GitAuditError as exc:
        full = f"commit {commit.id}"
        detail = exc.message.replace(f"{full}: ", "").replace(full, "it")
        raise LedgerError(
            f"{where} is not signed by a trusted runner ({detail}) and {refused}", hint=hint
        ) from None
    try:
        record = read_run(git, commit.id)
    except GitAuditError as exc:
        detail = exc.message.removeprefix(f"run {str(commit.id)[:12]}: ")
        raise LedgerError(f"{where}: {detail}; it {refused}", hint=hint) from None
    plan = ref.removeprefix(RUNS_PREFIX)
    if record.plan != plan:
        raise LedgerError(
            f"{where} is evidence for plan {record.plan!r}, not {plan!r}, and {refused}", hint=hint
        )


def _replay(
    git: pygit2.Repository,
    state: PlansState,
    ref: str,
    local: pygit2.Oid,
    theirs: pygit2.Oid,
    signer: Signer,
) -> tuple[pygit2.Oid, int]:
    """Sign each local-only run of *ref* again on top of *theirs*, each verified first: (new tip,
    number replayed). Writes objects only."""
    base = git.merge_base(local, theirs)
    replayed = list(reversed(list(chain.walk(git, local, stop=base, what=ref))))
    parent = theirs
    for n, commit in enumerate(replayed):
        _replayable(git, state, ref, commit, root_ok=base is None and n == 0)
        # the signed times are kept: evidence expires from when it was recorded, not pushed
        parent = create_signed_commit(
            git,
            tree=commit.tree_id,
            parents=[parent],
            message=commit.message,
            signer=signer,
            author=commit.author,
            committer=commit.committer,
        )
    return parent, len(replayed)


def _plans_to_adopt(
    repo: Repo, remote: str, theirs: pygit2.Oid | None
) -> tuple[Callable[[], PlansState], pygit2.Oid | None]:
    """The verified plans state replays are judged by (read when first needed), and the remote
    plans tip to fast-forward to (None: keep ours). The remote's plans are verified from our tip
    before anything is adopted."""
    git = repo.git
    ours = read_ref(git, PLANS_REF)
    if ours is None or theirs is None or ours == theirs or git.descendant_of(ours, theirs):
        return functools.cache(lambda: read_state(repo)), None
    if git.descendant_of(theirs, ours):
        read_state(repo)  # our own chain first, so a bad local ref is reported as ours
        adopted = read_state(repo, tip=theirs, remember=False)
        return lambda: adopted, theirs
    raise LedgerError(
        f"{PLANS_REF} has diverged from {remote!r}: both sides sealed changes",
        hint=f"fetch theirs (`git fetch {remote} +refs/audit/plans:refs/audit/plans` after "
        "saving yours), then reseal your plan changes on top",
    )


def reconcile_with(repo: Repo, remote: str, signer: Signer | None) -> list[SyncAction]:
    """Make every local runs ref a descendant of the remote's, replaying local-only runs.

    Every replay is verified and signed before any ref moves (objects may be written)."""
    remote_refs = fetch_mirror(repo, remote)
    git = repo.git
    state, adopt = _plans_to_adopt(repo, remote, remote_refs.get(PLANS_REF))
    moves: list[tuple[SyncAction, Callable[[], object] | None]] = []
    if adopt is not None:
        local_plans = read_ref(git, PLANS_REF)
        move = functools.partial(
            cas_update, git, PLANS_REF, adopt, local_plans, "gitaudit: fast-forward plans"
        )
        moves.append((SyncAction(PLANS_REF, "fast-forwarded"), move))
    for ref, local in sorted(list_refs(git, RUNS_PREFIX).items()):
        theirs = remote_refs.get(ref)
        if theirs is None:
            moves.append((SyncAction(ref, "local-only"), None))
            continue
        if theirs == local or git.descendant_of(local, theirs):
            moves.append((SyncAction(ref, "up-to-date"), None))
            continue
        if git.descendant_of(theirs, local):
            move = functools.partial(
                cas_update, git, ref, theirs, local, "gitaudit: fast-forward to remote runs"
            )
            moves.append((SyncAction(ref, "fast-forwarded"), move))
            continue
        if signer is None:
            raise LedgerError(
                f"{ref} has diverged from {remote!r}", hint="a runner key is needed to replay runs"
            )
        parent, count = _replay(git, state(), ref, local, theirs, signer)
        # both the old and the new chain descend from the merge base: with the marks lowered to
        # it while the ref moves (under the marks lock), a crash or a concurrent hook marking
        # the old tip can never make the new chain look like a rewind
        base = git.merge_base(local, theirs)
        message = f"gitaudit: replay {count} run(s) onto {remote}"
        move = functools.partial(
            watermark.rewrite,
            repo.gitdir,
            ref,
            str(base if base is not None else parent),
            str(parent),
            functools.partial(cas_update, git, ref, parent, local, message),
        )
        moves.append((SyncAction(ref, f"rebased {count}"), move))
    for ref in sorted(set(remote_refs) - set(list_refs(git, RUNS_PREFIX)) - {PLANS_REF}):
        if ref.startswith(RUNS_PREFIX):
            move = functools.partial(
                cas_update, git, ref, remote_refs[ref], None, "gitaudit: runs from remote"
            )
            moves.append((SyncAction(ref, "remote-only"), move))
    # everything is verified and signed: only now does any ref move
    checkpoint.reached("push.replayed", ",".join(a.ref for a, move in moves if move))
    for _action, apply in moves:
        if apply is not None:
            apply()
    return [action for action, _ in moves]


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
        if proc.code == 0:
            checkpoint.reached("push.pushed", remote)
        if proc.code == 0 or not result.lost_race or attempt == attempts:
            return result
        if on_retry is not None:
            on_retry(attempt, result)
        # let the winner get out of the way (jitter, not cryptography)
        time.sleep(random.uniform(0.05, 0.25 * attempt))  # noqa: S311
    return result
