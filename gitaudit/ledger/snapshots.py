"""Snapshots of the work tree on ``refs/audit/snapshots/NAME``, and rolling back to them.

A snapshot is a signed commit whose tree is the work tree's fingerprint (tracked and untracked
files that are not ignored, with modes and symlinks: :mod:`gitaudit.git.fingerprint`), so taking
one writes only the blobs git did not have yet. Taking the same name again chains the new
snapshot onto the old one (``git log refs/audit/snapshots/NAME`` lists its versions). Snapshots
hold untracked files, which may be private: they stay in this repository (servers refuse them,
and `git audit push` does not send them).

The user signs a snapshot whenever they ask for one (`snapshot`, `run --snapshot`, `rollback`),
and its tree is whatever the work tree holds: the agent's design. So a snapshot is signed for
its own SSHSIG namespace (:data:`~gitaudit.crypto.commits.SNAPSHOT_NAMESPACE`), which no ledger
reader (nor ``git verify-commit``) accepts: a snapshot is never a plans commit, a run or any
other signed record, whatever ref it is put on. It is chained only onto an earlier version that
verifies as a snapshot; anything else the ref holds (the agent can write it) is left out of the
new snapshot's history.

`git audit rollback NAME [--paths GLOB..]` brings the work tree back to the snapshot within the
scope (:mod:`gitaudit.git.restore` does the careful part), after checking that:

* the snapshot is signed by a key the repository trusts, or by the signing key in use;
* nothing it would overwrite or delete is lost: each such file must be as HEAD or some snapshot
  holds it, unless ``--force``;
* no earlier rollback was interrupted.

It first takes the ``pre-rollback`` snapshot of the work tree as it is (so a rollback, forced
or not, is itself undone by `git audit rollback pre-rollback`), then writes a journal to the
state directory, changes the files, and removes the journal. Interrupted, the journal remains:
`rollback --continue` finishes the same rollback, `rollback --abort` brings back the
``pre-rollback`` snapshot, both within the same scope.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pygit2

from gitaudit.crypto.commits import (
    SNAPSHOT_NAMESPACE,
    create_signed_commit,
    snapshot_marker,
    verify_commit,
)
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, LedgerError, UsageError
from gitaudit.frozen import frozen
from gitaudit.git import restore
from gitaudit.git.fingerprint import workspace_fingerprint
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.refs import SNAPSHOTS_PREFIX, RefConflict, cas_update, list_refs, read_ref
from gitaudit.plan.globs import WHOLE_TREE

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
UNDO = "pre-rollback"
JOURNAL = "rollback.json"
JOURNAL_FORMAT = "gitaudit.rollback/1"
SHOWN = 5


class SnapshotError(GitAuditError):
    """A snapshot that cannot be taken, found, trusted or rolled back to."""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name) or name.endswith(".lock") or ".." in name:
        raise UsageError(
            f"{name!r} is not a safe snapshot name",
            hint="use letters, digits, '.', '_' and '-' (at most 100), starting with a letter "
            "or digit, e.g. `before-refactor`",
        )
    return name


def snapshot_ref(name: str) -> str:
    return f"{SNAPSHOTS_PREFIX}{check_name(name)}"


@frozen
class Snapshot:
    name: str
    commit: str
    tree: str
    time: int
    head: str | None
    versions: int = 1
    unchained: str | None = None  # what the ref held that is no snapshot: not chained onto


def _identity(git: pygit2.Repository, at: int) -> pygit2.Signature:
    try:
        who = git.default_signature
        return pygit2.Signature(who.name, who.email, at, 0)
    except (KeyError, pygit2.GitError):
        return pygit2.Signature("gitaudit", "gitaudit@localhost", at, 0)


def take(
    repo: Repo, signer: Signer, name: str, note: str = "", trusted: Sequence[PublicKey] = ()
) -> Snapshot:
    """Snapshot the work tree as *name*, chained onto the earlier snapshot of that name when it
    verifies as a snapshot signed by *trusted* or *signer* (anything else on the ref, which
    the agent can write, is not chained onto: the new snapshot starts its own history)."""
    ref = snapshot_ref(name)
    workdir = repo.require_workdir()
    fp = workspace_fingerprint(workdir)
    git = repo.git
    keys = [*trusted, signer.public_key]
    for _ in range(20):
        current = read_ref(git, ref)
        parent = current if current is not None and _is_snapshot(repo, current, keys) else None
        at = int(time.time())
        who = _identity(git, at)
        message = (
            f"snapshot: {name}" + (f" — {note}" if note else "") + "\n\n"
            f"Audit-Snapshot: {name}\nAudit-Tree: {fp.tree}\n"
            + (f"Audit-Head: {fp.head}\n" if fp.head else "")
        )
        commit = create_signed_commit(
            git,
            tree=fp.tree,
            parents=[parent] if parent is not None else [],
            message=message,
            signer=signer,
            author=who,
            committer=who,
            namespace=SNAPSHOT_NAMESPACE,
        )
        try:
            cas_update(git, ref, commit, current, f"gitaudit: snapshot {name}")
        except RefConflict:
            continue
        unchained = str(current) if current is not None and parent is None else None
        return Snapshot(name, str(commit), fp.tree, at, fp.head, unchained=unchained)
    raise LedgerError(f"{ref} kept moving; no snapshot was taken")


def unchained_note(taken: Snapshot) -> str:
    """What to tell the user when *taken* did not chain onto what its ref held."""
    ref = snapshot_ref(taken.name)
    held = (taken.unchained or "")[:12]
    return (
        f"{ref} held {held}, which is no snapshot of a trusted key: the new snapshot does not "
        f"build on it (`git show {held}` shows what it was)"
    )


def _is_snapshot(repo: Repo, oid: pygit2.Oid, keys: Sequence[PublicKey]) -> bool:
    """Whether commit *oid* is a snapshot one of *keys* signed (for the snapshot namespace)."""
    try:
        verify_commit(repo.git, oid, keys, SNAPSHOT_NAMESPACE)
    except GitAuditError:
        return False
    return True


def _head_of(commit: pygit2.Commit) -> str | None:
    for line in commit.message.splitlines():
        if line.startswith("Audit-Head: "):
            return line.removeprefix("Audit-Head: ").strip()
    return None


def listing(repo: Repo) -> list[Snapshot]:
    """Every snapshot name, newest version first within each, names sorted."""
    out = []
    for ref, oid in sorted(list_refs(repo.git, SNAPSHOTS_PREFIX).items()):
        commit = commit_of(repo.git, oid, ref)
        versions = sum(1 for _ in chain.walk(repo.git, oid, what=ref))
        out.append(
            Snapshot(
                ref.removeprefix(SNAPSHOTS_PREFIX),
                str(oid),
                str(commit.tree_id),
                commit.commit_time,
                _head_of(commit),
                versions,
            )
        )
    return out


def resolve(repo: Repo, name: str, trusted: Sequence[PublicKey]) -> Snapshot:
    """The newest version of snapshot *name*, its signature checked against *trusted*."""
    ref = snapshot_ref(name)
    oid = read_ref(repo.git, ref)
    if oid is None:
        known = ", ".join(s.name for s in listing(repo)) or "none"
        raise SnapshotError(
            f"there is no snapshot named {name!r} (snapshots: {known})",
            hint="`git audit snapshots` lists them; `git audit snapshot NAME` takes one",
        )
    commit = commit_of(repo.git, oid, ref)
    try:
        verify_commit(repo.git, oid, trusted, SNAPSHOT_NAMESPACE)
    except GitAuditError as exc:
        raise SnapshotError(
            f"snapshot {name!r} ({str(oid)[:12]}) is not signed by a key this repository "
            f"trusts: {exc.message}",
            hint=f"take snapshots with your own key; inspect it with `git show {str(oid)[:12]}` "
            f"(one taken before snapshots had their own signature namespace is restored by "
            f"hand: `git restore --source={str(oid)[:12]} -- PATHS`)",
        ) from None
    signed_as = snapshot_marker(commit.message)
    if signed_as != name:
        short = str(oid)[:12]
        raise SnapshotError(
            f"{ref} holds {short}, a snapshot signed "
            + (f"as {signed_as!r}" if signed_as is not None else "with no name")
            + f", not as {name!r}: the "
            "name was pointed at another snapshot, and rolling back would restore that one",
            hint=f"nothing was changed; `git audit snapshots` lists the names and `git show "
            f"{short}` what it holds; restore it by hand if you mean to: "
            f"`git restore --source={short} -- PATHS`",
        )
    return Snapshot(name, str(oid), str(commit.tree_id), commit.commit_time, _head_of(commit))


# ------------------------------------------------------------------------------- rollback


@frozen
class Rollback:
    snapshot: Snapshot
    scope: tuple[str, ...]
    undo: str | None  # the pre-rollback snapshot commit (None: nothing needed changing)
    applied: restore.Applied
    left: tuple[str, ...]  # paths in scope that still differ from the snapshot


def _journal(repo: Repo) -> Path:
    return repo.state_dir / JOURNAL


def pending(repo: Repo) -> dict[str, Any] | None:
    """The journal of an interrupted rollback, or None."""
    try:
        doc = json.loads(_journal(repo).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SnapshotError(
            f"the rollback journal {_journal(repo)} cannot be read ({exc})",
            hint="restore the files with `git audit rollback pre-rollback --force`, then delete it",
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != JOURNAL_FORMAT:
        raise SnapshotError(f"{_journal(repo)} is not a rollback journal")
    return doc


def _write_journal(repo: Repo, doc: dict[str, Any]) -> None:
    path = _journal(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rollback.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _ignore_case(repo: Repo) -> bool:
    return (repo.config("core.ignorecase") or "").lower() == "true"


def unsaved(repo: Repo, todo: Sequence[restore.Change], keys: Sequence[PublicKey]) -> list[str]:
    """The paths *todo* would overwrite or delete whose current content neither HEAD nor any
    snapshot signed by one of *keys* holds at that path (a commit the agent put on a snapshot
    ref holds nothing: it can take it away again)."""
    git = repo.git
    holders: list[dict[str, tuple[int, str]]] = []
    with contextlib.suppress(pygit2.GitError, KeyError):  # no commit yet
        holders.append(restore.entries(git, str(git.head.peel(pygit2.Tree).id)))
    held: list[dict[str, tuple[int, str]]] | None = None
    out = []
    for change in todo:
        if change.old is None:
            continue
        if any(h.get(change.path) == change.old for h in holders):
            continue
        if held is None:
            held = [
                restore.entries(git, s.tree)
                for s in listing(repo)
                if _is_snapshot(repo, pygit2.Oid(hex=s.commit), keys)
            ]
        if not any(h.get(change.path) == change.old for h in held):
            out.append(change.path)
    return out


def rollback(
    repo: Repo,
    signer: Signer,
    name: str,
    trusted: Sequence[PublicKey],
    scope: Sequence[str] = (WHOLE_TREE,),
    *,
    force: bool = False,
    progress: Callable[[restore.Change], None] | None = None,
) -> Rollback:
    """Bring the work tree back to snapshot *name* within *scope* (canonical globs)."""
    journal = pending(repo)
    if journal is not None:
        raise SnapshotError(
            f"a rollback to {journal.get('snapshot')!r} was interrupted",
            hint="finish it with `git audit rollback --continue`, or undo it with "
            "`git audit rollback --abort`",
        )
    target = resolve(repo, name, [*trusted, signer.public_key])
    workdir = repo.require_workdir()
    current = workspace_fingerprint(workdir).tree
    todo = restore.changes(repo.git, current, target.tree, scope, _ignore_case(repo))
    if not todo:
        return Rollback(target, tuple(scope), None, restore.Applied((), (), ()), ())
    bad = [c.path for c in todo if restore.unsafe(c.path)]
    if bad:
        raise SnapshotError(
            f"snapshot {name!r} holds {bad[0]!r}, a path a rollback never writes",
            hint="nothing was changed; this snapshot was not taken by `git audit snapshot`",
        )
    restore.refuse_local_smudge(workdir)
    if not force:
        keys = [*trusted, signer.public_key]
        _refuse_losses(repo, name, todo, keys, f"'{UNDO}' snapshot still keeps them")
    undo = take(repo, signer, UNDO, f"before rolling back to {name}", trusted)
    doc = {
        "format": JOURNAL_FORMAT,
        "snapshot": name,
        "target": target.commit,
        "tree": target.tree,
        "scope": list(scope),
        "undo": undo.commit,
        "undo_tree": undo.tree,
        "started": int(time.time()),
    }
    _write_journal(repo, doc)
    return _finish(repo, target, tuple(scope), undo.commit, progress)


def _refuse_losses(
    repo: Repo,
    name: str,
    todo: Sequence[restore.Change],
    keys: Sequence[PublicKey],
    keeps: str,
) -> None:
    """SnapshotError when *todo* would overwrite or delete changes no snapshot holds."""
    lost = unsaved(repo, todo, keys)
    if lost:
        more = f" and {len(lost) - SHOWN} more" if len(lost) > SHOWN else ""
        shown = ", ".join(lost[:SHOWN]) + more
        raise SnapshotError(
            f"rolling back to {name!r} would destroy {len(lost)} change(s) that no snapshot "
            f"holds: {shown}",
            hint=f"take a snapshot first (`git audit snapshot NAME`), or pass --force ({keeps})",
        )


def _finish(
    repo: Repo,
    target: Snapshot,
    scope: tuple[str, ...],
    undo: str,
    progress: Callable[[restore.Change], None] | None,
) -> Rollback:
    workdir = repo.require_workdir()
    ignore_case = _ignore_case(repo)
    current = workspace_fingerprint(workdir).tree
    todo = restore.changes(repo.git, current, target.tree, scope, ignore_case)
    applied = restore.apply(repo.git, workdir, repo.gitdir, target.tree, todo, progress)
    after = workspace_fingerprint(workdir).tree
    left = tuple(c.path for c in restore.changes(repo.git, after, target.tree, scope, ignore_case))
    with contextlib.suppress(FileNotFoundError):
        _journal(repo).unlink()
    return Rollback(target, scope, undo, applied, left)


def resume(
    repo: Repo,
    trusted: Sequence[PublicKey],
    *,
    abort: bool = False,
    force: bool = False,
    progress: Callable[[restore.Change], None] | None = None,
) -> Rollback:
    """Finish the interrupted rollback (or, with *abort*, bring back the ``pre-rollback``
    snapshot it took), within its scope. The journal only names the snapshot commits: each is
    read from git and its signature checked again. The journal is a file the agent can write
    (or put back after a rollback): like a rollback, finishing one refuses to destroy changes
    that no snapshot holds, unless *force* (an interrupted rollback's files are as its
    ``pre-rollback`` snapshot or its target holds them)."""
    journal = pending(repo)
    if journal is None:
        raise SnapshotError(
            "no rollback was interrupted", hint="`git audit rollback NAME` starts one"
        )
    try:
        scope = tuple(str(g) for g in journal["scope"])
        undo = str(journal["undo"])
        name = UNDO if abort else str(journal["snapshot"])
        oid = pygit2.Oid(hex=undo if abort else str(journal["target"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"the rollback journal {_journal(repo)} is damaged ({exc})") from None
    commit = commit_of(repo.git, oid, f"the rollback journal's {name!r} snapshot")
    try:
        verify_commit(repo.git, oid, trusted, SNAPSHOT_NAMESPACE)
    except GitAuditError as exc:
        raise SnapshotError(
            f"the journal's snapshot {str(oid)[:12]} is not signed by a trusted key: {exc.message}",
            hint=f"delete {_journal(repo)} and roll back to a snapshot you trust",
        ) from None
    target = Snapshot(name, str(oid), str(commit.tree_id), commit.commit_time, _head_of(commit))
    restore.refuse_local_smudge(repo.require_workdir())
    if not force:
        current = workspace_fingerprint(repo.require_workdir()).tree
        todo = restore.changes(repo.git, current, target.tree, scope, _ignore_case(repo))
        _refuse_losses(repo, name, todo, trusted, "no snapshot will keep them")
    return _finish(repo, target, scope, undo, progress)
