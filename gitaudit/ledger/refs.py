"""Audit refs and the one way they move: compare-and-swap.

Objects are always written before a ref moves, and a ref only moves from the value it was read at
(``git update-ref <ref> <new> <old>``, which takes git's own lock). A writer that loses the race
gets :class:`RefConflict` and re-reads, re-parents and retries. A lock file left by a process
killed while holding it is removed once it is clearly stale (git holds these locks for
milliseconds), so a crash never blocks the next command.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

import pygit2

from gitaudit.errors import LedgerError
from gitaudit.git.call import run_git
from gitaudit.git.environment import NO_HOOKS
from gitaudit.places import common_dir

PLANS_REF = "refs/audit/plans"
RUNS_PREFIX = "refs/audit/runs/"
AGENTS_REF = "refs/audit/agents"  # the agent registry and its claims (ledger/agents.py)
SNAPSHOTS_PREFIX = "refs/audit/snapshots/"  # local work tree snapshots (git/snapshots.py)
PROPOSALS_PREFIX = "refs/audit/proposals/"  # plans changes awaiting approvals (ledger/approvals.py)
ZERO = "0" * 40
STALE_LOCK_SECONDS = 10.0
MIRROR = "refs/gitaudit/remotes"  # remote-tracking copies of each remote's refs/audit/*


def fetch_refspec(remote: str) -> str:
    """The remote's audit refs, fetched (forced) into a private remote-tracking namespace that
    git never pushes from; gitaudit verifies before adopting anything from it."""
    return f"+refs/audit/*:{MIRROR}/{remote}/audit/*"


def runs_ref(plan: str) -> str:
    return f"{RUNS_PREFIX}{plan}"


def ledger_ref(key: str) -> str:
    """The runs ref a ledger key names: a plan name (its own ``refs/audit/runs/<plan>``) or a full
    ref name (a remote-tracking copy, :func:`mirrored_runs`)."""
    return key if key.startswith("refs/") else runs_ref(key)


def mirror_ref(remote: str, ref: str) -> str:
    """Where the remote-tracking copy of the remote's audit *ref* lives."""
    return f"{MIRROR}/{remote}/{ref.removeprefix('refs/')}"


def mirrored_runs(repo: pygit2.Repository, plan: str, marked: Iterable[str] = ()) -> dict[str, str]:
    """remote -> the remote-tracking copy of its ledger of *plan*, for every remote fetched,
    and for every copy named in *marked* (the refs a high-water mark names), whether or not it
    still exists: a copy the gate has seen and that is gone is a deleted ledger, not none."""
    suffix = f"/audit/runs/{plan}"
    out = {}
    listed = ref_names(repo, MIRROR + "/")
    for name in [*listed, *(m for m in marked if m.startswith(MIRROR + "/"))]:
        if name.endswith(suffix):
            remote = name[len(MIRROR) + 1 : -len(suffix)]
            if remote:
                out[remote] = name
    return dict(sorted(out.items()))


class RefConflict(LedgerError):
    """The ref moved between reading it and updating it; re-read and retry."""


def read_ref(repo: pygit2.Repository, name: str) -> pygit2.Oid | None:
    """The commit a ref points at, or None when it does not exist."""
    try:
        ref = repo.references[name]
    except KeyError:
        return None
    except pygit2.GitError as exc:
        raise LedgerError(f"{name} cannot be read: {exc}", hint="run `git fsck`") from exc
    try:
        target = ref.resolve().target
    except (KeyError, pygit2.GitError):  # a symbolic ref to a ref that does not exist
        raise LedgerError(
            f"{name} is a symbolic ref to {ref.target}, which does not exist",
            hint=f"restore {name}, or delete it: `git update-ref -d --no-deref {name}`",
        ) from None
    if not isinstance(target, pygit2.Oid):
        raise LedgerError(f"{name} is not a direct reference")
    return target


def list_refs(repo: pygit2.Repository, prefix: str) -> dict[str, pygit2.Oid]:
    out = {}
    for name in ref_names(repo, prefix):
        oid = read_ref(repo, name)
        if oid is not None:
            out[name] = oid
    return out


def ref_names(repo: pygit2.Repository, prefix: str) -> list[str]:
    """The names of the refs under *prefix* (``refs/.../``): libgit2's listing, and the loose
    ref files below the prefix's folder in the common dir, found by a walk of gitaudit's own.
    libgit2's listing stops without an error at the first entry under ``refs/`` it cannot
    stat (a dangling link, a link loop, a link to a parent folder) and leaves out every loose
    ref after it, which git lists and a lookup by name still finds: a remote-tracking copy of
    a ledger holding a newer failure vanished from the gate that way. Each name is read by
    name (:func:`read_ref`), as every other ref is."""
    names = {name for name in repo.references if name.startswith(prefix)}
    try:
        root = os.path.join(common_dir(repo.path), *prefix.strip("/").split("/"))
    except OSError:
        root = ""
    stack = [(root, prefix.rstrip("/"))] if root else []
    folders: set[tuple[int, int]] = set()
    while stack:
        folder, name = stack.pop()
        try:
            stat = os.stat(folder)
            if (stat.st_dev, stat.st_ino) in folders:  # a link back up: walked once
                continue
            folders.add((stat.st_dev, stat.st_ino))
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            child = f"{name}/{entry.name}"
            try:
                is_dir = entry.is_dir()  # through a link, as git's own listing goes
            except OSError:
                is_dir = False
            if is_dir:
                stack.append((entry.path, child))
            elif not entry.name.endswith(".lock") and pygit2.reference_is_valid_name(child):
                names.add(child)
    return sorted(names)


def _lock_path(gitdir: Path, name: str) -> Path:
    return gitdir / f"{name}.lock"


def clear_stale_lock(gitdir: Path, name: str, *, older_than: float = STALE_LOCK_SECONDS) -> bool:
    """Remove ``<ref>.lock`` when it is older than *older_than* seconds (left by a crash)."""
    lock = _lock_path(gitdir, name)
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age < older_than:
        return False
    try:
        lock.unlink()
    except FileNotFoundError:
        return False
    return True


LOCK_WAIT_SECONDS = STALE_LOCK_SECONDS + 2.0


def cas_update(
    repo: pygit2.Repository,
    name: str,
    new: pygit2.Oid | str,
    expected: pygit2.Oid | str | None,
    message: str,
) -> None:
    """Move *name* to *new* only if it still points at *expected* (None: must not exist).

    Raises :class:`RefConflict` when another writer got there first, LedgerError otherwise.
    """
    gitdir = Path(repo.path)
    old = str(expected) if expected is not None else ZERO
    # no hook of the repository's (`reference-transaction`) runs in the writer's process
    args = [*NO_HOOKS, "update-ref", "-m", message, name, str(new), old]
    # wait for a held lock until a crashed writer's lock would count as stale, and a little more
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    attempt = 0
    while True:
        proc = run_git(args, git_dir=gitdir, check=False)
        if proc.code == 0:
            return
        err = proc.stderr.decode("utf-8", "replace").strip()
        if ".lock" in err and ("File exists" in err or "Unable to create" in err):
            # Another writer holds the lock right now, or a crash left it behind.
            if time.monotonic() >= deadline:
                break
            if not clear_stale_lock(gitdir, name):
                attempt += 1
                time.sleep(min(0.005 * attempt, 0.1))
            continue
        current = read_ref(repo, name)
        if (current is None and expected is not None) or (
            current is not None and str(current) != old
        ):
            raise RefConflict(f"{name} moved from {old[:12]} to {str(current)[:12]} meanwhile")
        raise LedgerError(f"cannot update {name}: {err}")
    raise LedgerError(
        f"cannot update {name}: its lock stays held",
        hint=f"if no gitaudit or git process is running, remove {_lock_path(gitdir, name)}",
    )
