"""Sharing the ledger: bring a remote's audit refs in, and re-parent local runs onto them.

Evidence is recorded on each machine as a linear chain per plan, and servers accept audit refs
only as fast-forwards. When another machine pushed runs first, `git audit push` fetches the
remote's audit refs into a private namespace and replays this machine's new run commits on top
(same trees, messages and times, signed again by the local runner key), so nothing is lost and
the push stays a fast-forward. A diverged plans ref is never merged automatically: seals are judged
against their predecessor, so the sealer must fetch and reseal.

Re-signing is vouching, so nothing is re-signed unverified: each local-only run commit must be a
single-parent commit signed by a runner trusted in the verified plans state (the remote's, when
the plans ref is adopted from it), holding a well-formed ``run.json`` for the ref's own plan
and nothing but a run's files at the top of its tree; the key that signs again must be a
runner, and the remote's tip the replays go onto a run of that plan (the key and the remote's
URL come from ``.git/config``: a replay of a tree that is also a plans tree, onto the plans tip,
with a sealer's key, would be a fast-forward of ``refs/audit/plans``). Anything else stops the
push with one error naming the commit, and no ref moves: every ref update is applied only once
every replay of the push has been verified and signed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import re
import time
from collections.abc import Callable

import pygit2

from gitaudit import checkpoint
from gitaudit.crypto.commits import create_signed_commit, verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Signer
from gitaudit.crypto.sshsig import verify
from gitaudit.errors import GitAuditError, LedgerError
from gitaudit.frozen import frozen
from gitaudit.git.call import run_git
from gitaudit.git.environment import NO_HOOKS
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.anchor import pinned_root
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import PlansState, read_state, verify_chain
from gitaudit.ledger.proposals import pushable
from gitaudit.ledger.refs import (
    MIRROR,
    PLANS_REF,
    RUNS_PREFIX,
    cas_update,
    clear_stale_lock,
    fetch_refspec,
    list_refs,
    mirror_ref,
    read_ref,
)
from gitaudit.ledger.runs import RUN_FILES, foreign_entries, read_run


@frozen
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
        # no hook of the repository's runs (`reference-transaction`, an automatic gc's)
        [*NO_HOOKS, "fetch", "--refmap=", "--no-tags", remote, fetch_refspec(remote)],
        git_dir=repo.gitdir,
        check=False,
        transport=True,
    )
    if proc.code != 0:
        raise LedgerError(f"cannot fetch the audit refs of {remote!r}: {proc.err}")
    fetched = {
        name.removeprefix(prefix).replace("audit/", "refs/audit/", 1): oid
        for name, oid in list_refs(repo.git, prefix).items()
    }
    for ref, oid in fetched.items():
        if ref == PLANS_REF or ref.startswith(RUNS_PREFIX):  # what is compared, adopted, replayed
            try:
                commit_of(repo.git, oid, f"{ref} of remote {remote!r}")
            except LedgerError as exc:
                raise LedgerError(
                    f"{exc.message}; nothing was taken from it",
                    hint=f"check the remote's URL (`git remote -v`) and its {ref}",
                ) from None
    return fetched


_REPLAYED = ("local run", "is not replayed; nothing was pushed")
_FETCHED = ("fetched run", "is not taken into the local ledger")


def _replayable(
    git: pygit2.Repository,
    state: PlansState,
    ref: str,
    commit: pygit2.Commit,
    root_ok: bool,
    what: tuple[str, str] = _REPLAYED,
    resigner: PublicKey | None = None,
) -> None:
    """LedgerError unless local-only run *commit* may be re-signed for *ref* by *resigner* (or,
    with *what* ``_FETCHED``, a fetched run taken into the local ledger): one parent (none only
    for the first commit of a ledger), signed by a runner trusted in *state* (by *resigner*
    itself, when given: signed again by another runner, an agent's advisory run would become
    the word of a runner an evidence rule admits), and a well-formed run.json for the ref's
    plan. The signature is checked first: nothing an untrusted commit holds is read."""
    where = f"{ref}: {what[0]} {str(commit.id)[:12]}"
    refused = what[1]
    hint = (
        f"inspect it (`git show {str(commit.id)[:12]}`, `git audit verify`), then reset {ref} "
        "to the last good run before pushing"
    )
    parents = len(commit.parent_ids)
    if parents > 1 or (parents == 0 and not root_ok):
        raise LedgerError(f"{where} has {parents} parents (a run has one) and {refused}", hint=hint)
    try:
        signed_by = verify_commit(git, commit.id, state.trust.with_role("runner"))
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
    # signed again, a tree that also holds (say) trust/ would be the signer's plans commit
    extra = foreign_entries(commit.tree)
    if extra:
        raise LedgerError(
            f"{where} holds {', '.join(extra)} besides a run's files "
            f"({', '.join(f'{n}/' if k == 'tree' else n for n, k in RUN_FILES.items())}) "
            f"and {refused}",
            hint=hint,
        )
    if resigner is not None and signed_by.raw != resigner.raw:
        raise LedgerError(
            f"{where} is signed by {_named(state, signed_by)}, not by "
            f"{_named(state, resigner)}, whose key would sign it again, and {refused}",
            hint=f"push it with the key that signed it, or reset {ref} to the last run of "
            "your own key before pushing",
        )


def _named(state: PlansState, key: PublicKey) -> str:
    """A runner's name in *state* and its key's fingerprint."""
    entry = state.trust.find(key)
    return f"{entry.name} ({key.fingerprint()})" if entry is not None else key.fingerprint()


def _not_taken(
    git: pygit2.Repository,
    state: PlansState,
    ref: str,
    theirs: pygit2.Oid,
    ours: pygit2.Oid | None,
) -> str | None:
    """Why the remote's runs *theirs*, ahead of the local *ref* at *ours* (None: the clone has
    no such ref), are not taken into the local ledger, or None: every run they add must verify
    as a replay would (a trusted runner's, one parent, this plan's record). A remote without
    gitaudit's hook holds whatever was pushed to it, and the clone's next runs are recorded on
    top of what it takes in."""
    try:
        for commit in chain.walk(git, theirs, stop=ours, what=ref):
            root_ok = ours is None and not commit.parent_ids
            _replayable(git, state, ref, commit, root_ok, what=_FETCHED)
    except GitAuditError as exc:
        return exc.message
    return None


def _replay_base(git: pygit2.Repository, ref: str, remote: str, theirs: pygit2.Oid) -> None:
    """LedgerError unless the remote's tip *theirs*, which replays are signed onto, is a run of
    *ref*'s plan: the remote (its URL is in .git/config) could hold any commit there, and a
    replay onto the plans tip is a fast-forward of refs/audit/plans."""
    plan = ref.removeprefix(RUNS_PREFIX)
    try:
        record = read_run(git, theirs)
        problem = None if record.plan == plan else f"a run of plan {record.plan!r}"
        extra = foreign_entries(commit_of(git, theirs, ref).tree)
        problem = problem or (f"a commit holding {', '.join(extra)}" if extra else None)
    except GitAuditError as exc:
        problem = exc.message
    if problem is not None:
        raise LedgerError(
            f"{remote!r} holds {str(theirs)[:12]} on {ref}, which is no run of plan {plan!r} "
            f"({problem}); nothing is replayed onto it and nothing was pushed",
            hint=f"check the remote's URL (`git remote -v`) and its {ref}",
        )


def _replay_signer(state: PlansState, ref: str, signer: Signer) -> None:
    """LedgerError unless *signer* is a runner of *state*: a replay is a run, signed again (and
    the key is whatever audit.signingKey in .git/config names, a sealer's too)."""
    key = signer.public_key
    entry = state.trust.find(key)
    if entry is None or not entry.may("runner"):
        who = (
            f"key {entry.name} ({key.fingerprint()}), which is not a runner"
            if entry is not None
            else f"key {key.fingerprint()}, which is not trusted"
        )
        raise LedgerError(
            f"{ref}: its local runs would be signed again by {who}; nothing was replayed or pushed",
            hint="push with a runner key (`audit.signingKey`, `$GITAUDIT_SIGNING_KEY`)",
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
        _replayable(
            git, state, ref, commit, root_ok=base is None and n == 0, resigner=signer.public_key
        )
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
    if theirs is None or ours == theirs or (ours is not None and git.descendant_of(ours, theirs)):
        return functools.cache(lambda: read_state(repo)), None
    if ours is None:  # a fresh clone: the remote's, verified from its root (and the pin)
        adopted = read_state(repo, tip=theirs, remember=False)
        return lambda: adopted, theirs
    if git.descendant_of(theirs, ours):
        read_state(repo)  # our own chain first, so a bad local ref is reported as ours
        adopted = read_state(repo, tip=theirs, remember=False)
        return lambda: adopted, theirs
    raise LedgerError(
        f"{PLANS_REF} has diverged from {remote!r}: both sides sealed changes",
        hint=f"`git audit sync {remote} --take-remote-plans` drops the local-only seals (the plan "
        "files stay as they are), then reseal your plan changes on top",
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
            why = _not_taken(git, state(), ref, theirs, local)
            move = functools.partial(
                cas_update, git, ref, theirs, local, "gitaudit: fast-forward to remote runs"
            )
            moves.append(
                (SyncAction(ref, f"not taken: {why}"), None)
                if why
                else (SyncAction(ref, "fast-forwarded"), move)
            )
            continue
        if signer is None:
            raise LedgerError(
                f"{ref} has diverged from {remote!r}", hint="a runner key is needed to replay runs"
            )
        _replay_signer(state(), ref, signer)
        _replay_base(git, ref, remote, theirs)
        # the local runs are signed again on top of the remote's: every run it has that the
        # clone lacks is verified first, as one taken in by a fast-forward is
        base = git.merge_base(local, theirs)
        why = _not_taken(git, state(), ref, theirs, base)
        if why:
            raise LedgerError(
                f"{ref}: {remote!r} holds runs since the last one both sides share that this "
                f"ledger does not take in ({why}); nothing was replayed or pushed",
                hint=f"check the remote's URL (`git remote -v`) and its {ref}",
            )
        parent, count = _replay(git, state(), ref, local, theirs, signer)
        # both the old and the new chain descend from the merge base: with the marks lowered to
        # it while the ref moves (under the marks lock), a crash or a concurrent hook marking
        # the old tip can never make the new chain look like a rewind
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
            why = _not_taken(git, state(), ref, remote_refs[ref], None)
            move = functools.partial(
                cas_update, git, ref, remote_refs[ref], None, "gitaudit: runs from remote"
            )
            moves.append(
                (SyncAction(ref, f"not taken: {why}"), None)
                if why
                else (SyncAction(ref, "remote-only"), move)
            )
    # everything is verified and signed: only now does any ref move
    checkpoint.reached("push.replayed", ",".join(a.ref for a, move in moves if move))
    for _action, apply in moves:
        if apply is not None:
            apply()
    return [action for action, _ in moves]


def sync(
    repo: Repo, remote: str, *, take_remote_plans: bool = False, signer: Signer | None = None
) -> list[SyncAction]:
    """Bring *remote*'s audit refs in: fetch them into the remote-tracking namespace, adopt its
    plans ref when it is ahead and verifies (or, with *take_remote_plans*, when it diverged: the
    local-only seals are dropped, which only a sealer of the local plans, *signer*, may decide),
    and fast-forward each local runs ref that is behind (creating those that exist only there).
    Diverged runs refs are left for `git audit push` to replay; nothing is signed here."""
    remote_refs = fetch_mirror(repo, remote)
    git = repo.git
    actions: list[SyncAction] = []
    theirs_plans = remote_refs.get(PLANS_REF)
    state: Callable[[], PlansState] = functools.cache(lambda: read_state(repo))
    try:
        state, adopt = _plans_to_adopt(repo, remote, theirs_plans)
    except LedgerError:
        if not take_remote_plans or theirs_plans is None:
            raise
        actions.append(_take_plans(repo, theirs_plans, signer))
    else:
        if adopt is not None:
            cas_update(git, PLANS_REF, adopt, read_ref(git, PLANS_REF), "gitaudit: sync plans")
            actions.append(SyncAction(PLANS_REF, "fast-forwarded"))
        elif theirs_plans is not None:
            ours = read_ref(git, PLANS_REF)
            actions.append(SyncAction(PLANS_REF, "up-to-date" if ours == theirs_plans else "ahead"))
    local = list_refs(git, RUNS_PREFIX)
    for ref in sorted(set(local) | {r for r in remote_refs if r.startswith(RUNS_PREFIX)}):
        actions.append(_sync_runs(repo, state, ref, local.get(ref), remote_refs.get(ref)))
    return actions


TAKE_PLANS_NAMESPACE = "gitaudit-take-remote-plans"  # a nonce signed to prove a sealer is here


def _may_drop_seals(state: PlansState, signer: Signer | None) -> None:
    """LedgerError unless *signer* is a sealer of the local plans *state* and holds its key:
    taking a diverged remote plans ref drops the local-only seals, a rewind of refs/audit/plans
    that no other command makes without a sealer's signature (a remote whose plans diverged,
    which the agent points ``origin`` at, would otherwise undo the user's stricter seal)."""
    hint = (
        "dropping seals is a sealer's decision: run it with a sealer's key (`--key`, "
        "`audit.signingKey`), or have a sealer reseal on top of the remote's plans"
    )
    if signer is None:
        raise LedgerError(
            f"--take-remote-plans drops local-only seals of {PLANS_REF} and needs a sealer's "
            "key; none was found",
            hint=hint,
        )
    entry = state.trust.find(signer.public_key)
    if entry is None or not entry.may("sealer"):
        who = entry.name if entry is not None else signer.public_key.fingerprint()
        raise LedgerError(
            f"--take-remote-plans drops local-only seals of {PLANS_REF}, and key {who} is no "
            "sealer of them",
            hint=hint,
        )
    nonce = os.urandom(32)
    try:
        signed_by = verify(signer.sign(nonce, TAKE_PLANS_NAMESPACE), nonce, TAKE_PLANS_NAMESPACE)
    except GitAuditError as exc:
        raise LedgerError(
            f"--take-remote-plans: the sealer's key {entry.name} cannot sign ({exc.message})",
            hint=hint,
        ) from None
    if signed_by.raw != signer.public_key.raw:
        raise LedgerError(
            f"--take-remote-plans: the key that signed is not {entry.name}'s", hint=hint
        )


def _take_plans(repo: Repo, theirs: pygit2.Oid, signer: Signer | None) -> SyncAction:
    """Replace a diverged local plans ref with the remote's, verified from its root first, when
    a sealer of the local plans (*signer*) decides so."""
    git = repo.git
    _may_drop_seals(read_state(repo), signer)
    # the whole chain, from its root (under the pinned key): the marks describe ours, not theirs
    verify_chain(git, theirs, pinned_root=pinned_root(repo))
    ours = read_ref(git, PLANS_REF)
    base = git.merge_base(ours, theirs) if ours is not None else None
    dropped = chain.count(git, ours, base) if ours is not None else 0
    watermark.rewrite(
        repo.gitdir,
        PLANS_REF,
        str(base if base is not None else theirs),
        str(theirs),
        functools.partial(cas_update, git, PLANS_REF, theirs, ours, "gitaudit: take remote plans"),
    )
    return SyncAction(PLANS_REF, f"replaced by the remote's ({dropped} local-only seal(s) dropped)")


def _sync_runs(
    repo: Repo,
    state: Callable[[], PlansState],
    ref: str,
    ours: pygit2.Oid | None,
    theirs: pygit2.Oid | None,
) -> SyncAction:
    """Fast-forward (or create) the local runs *ref* to the remote's *theirs* when every run it
    adds verifies as a replay would (a trusted runner's, one parent, this plan's record)."""
    git = repo.git
    if theirs is None:
        return SyncAction(ref, "local-only")
    if ours == theirs:
        return SyncAction(ref, "up-to-date")
    if ours is None or git.descendant_of(theirs, ours):
        why = _not_taken(git, state(), ref, theirs, ours)
        if why:
            return SyncAction(ref, f"not taken: {why}")
        cas_update(git, ref, theirs, ours, "gitaudit: runs from remote")
        return SyncAction(ref, "remote-only" if ours is None else "fast-forwarded")
    if git.descendant_of(ours, theirs):
        return SyncAction(ref, f"ahead by {chain.count(git, ours, theirs)}")
    base = git.merge_base(ours, theirs)
    return SyncAction(
        ref, f"diverged: {chain.count(git, ours, base)} local run(s) are replayed by git audit push"
    )


# ------------------------------------------------------------------------------------ pushing

ATTEMPTS = 10  # with 32 writers on one runs ref, five were often not enough
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


@frozen
class PushedRef:
    flag: str  # git's porcelain flag: ' ' '+' '-' '*' '=' or '!' (rejected)
    source: str
    target: str
    summary: str  # e.g. "[new branch]", "[rejected] (fetch first)"


@frozen
class PushResult:
    code: int  # git push's exit code of the last attempt
    attempts: int
    refs: tuple[PushedRef, ...]  # per ref, as git reported the last attempt
    actions: tuple[SyncAction, ...]  # what reconciling the audit refs did, over all attempts
    messages: str = ""  # git's (and the remote's) messages of the last attempt

    @property
    def refused(self) -> tuple[str, ...]:
        """The refs refused for a reason of their own (not only because the push is atomic),
        including those the server could not lock because they had moved; when gitaudit's
        pre-receive refused only audit refs that had moved, those."""
        moved = self._moved_at_hook()
        if moved:
            return moved
        own = [r.target for r in self.refs if r.flag == "!" and not _only_atomic(r.summary)]
        return tuple(dict.fromkeys([*own, *_LOCK_FAILED.findall(self.messages)]))

    @property
    def _declined(self) -> bool:
        """The server's pre-receive hook refused the push (git says so per ref, on stdout with
        --porcelain, and in its messages without)."""
        said = "hook declined"
        return said in self.messages or any(said in r.summary for r in self.refs)

    def _moved_at_hook(self) -> tuple[str, ...]:
        """The audit refs gitaudit's pre-receive refused because they had moved since the
        server advertised them, when that was all it refused (it then judges nothing else)."""
        if not self._declined:
            return ()
        moved = _HOOK_MOVED.findall(self.messages)
        if len(moved) != len(_HOOK_REJECTED.findall(self.messages)):
            return ()
        return tuple(dict.fromkeys(moved))

    @property
    def lost_race(self) -> bool:
        """Only audit run refs were refused, each because the remote had moved between our
        fetch and our push: fetching and replaying again will help."""
        if self.code == 0 or not self.refused:
            return False
        if self._declined:
            at_hook = self._moved_at_hook()
            return bool(at_hook) and all(ref.startswith(RUNS_PREFIX) for ref in at_hook)
        locked = set(_LOCK_FAILED.findall(self.messages))
        reasons = {r.target: r.summary for r in self.refs}
        return all(
            ref.startswith(RUNS_PREFIX) and (ref in locked or _race_reason(reasons.get(ref, "")))
            for ref in self.refused
        )


def _push_plans_first(
    repo: Repo, remote: str, attempt: int, actions: tuple[SyncAction, ...]
) -> PushResult | None:
    """Push the plans ref alone when the remote's (as just fetched) is behind ours: its result,
    or None when there was nothing to send."""
    ours = read_ref(repo.git, PLANS_REF)
    theirs = read_ref(repo.git, mirror_ref(remote, PLANS_REF))
    if ours is None or ours == theirs:
        return None
    proc = run_git(
        ["push", "--porcelain", remote, f"{PLANS_REF}:{PLANS_REF}"],
        cwd=repo.workdir or repo.gitdir,
        check=False,
        transport=True,
    )
    messages = proc.stderr.decode("utf-8", "replace")
    result = PushResult(proc.code, attempt, _porcelain(proc.out), actions, messages)
    if proc.code == 0:  # what the remote now holds, so the next fetch starts from it
        with contextlib.suppress(GitAuditError):
            cas_update(repo.git, mirror_ref(remote, PLANS_REF), ours, theirs, "gitaudit: pushed")
    return result


def _only_atomic(summary: str) -> bool:
    return "atomic push failed" in summary or "atomic transaction failed" in summary


def _race_reason(summary: str) -> bool:
    return any(w in summary for w in _RACE_REASONS)


_LOCK_FAILED = re.compile(r"cannot lock ref '([^']+)': is at [0-9a-f]+ but expected")
# gitaudit's pre-receive (gitaudit.hooks.entry.MOVED): an audit ref moved since the advertisement
_HOOK_MOVED = re.compile(r"gitaudit: rejecting (\S+): the push says it was at [0-9a-f]+, but")
_HOOK_REJECTED = re.compile(r"gitaudit: rejecting (\S+): ")


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
    """Push *specs* with every audit ref in one atomic push. A plans ref the remote does not
    have yet goes first, alone: the server judges the branch with the plans it already holds, so
    a reseal must arrive before the commits it governs. When another machine wins the race for a
    shared runs ref between our fetch and our push, fetch and replay again, and retry (up to
    *attempts* pushes, with a short jittered back-off). A refusal for any other reason (the
    server's hook, a branch that is behind) is returned at once."""
    actions: list[SyncAction] = []
    result = PushResult(1, 0, (), ())
    for attempt in range(1, attempts + 1):
        reconciled = reconcile_with(repo, remote, signer)
        actions += reconciled
        first = _push_plans_first(repo, remote, attempt, tuple(actions))
        if first is not None and first.code != 0:
            return first
        # a runs ref whose remote runs were not taken in is behind them or absent: nothing to send
        refused = {a.ref for a in reconciled if a.action.startswith("not taken")}
        audit_refs = [PLANS_REF] if read_ref(repo.git, PLANS_REF) else []
        audit_refs += sorted(set(list_refs(repo.git, RUNS_PREFIX)) - refused)
        audit_refs += pushable(repo, remote)  # proposals awaiting approvals, fast-forwards only
        proc = run_git(
            ["push", "--atomic", "--porcelain", remote, *specs, *(f"{r}:{r}" for r in audit_refs)],
            cwd=repo.workdir or repo.gitdir,
            check=False,
            transport=True,
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
        time.sleep(random.uniform(0.05, min(2.0, 0.25 * attempt)))  # noqa: S311
    return result
