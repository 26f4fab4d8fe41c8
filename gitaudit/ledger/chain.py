"""Walking a ledger: the first-parent chain of an audit ref, newest first.

Audit refs are linear chains of commits (each run or plans commit has at most one parent). Every
walk over one goes through :func:`walk`, which reads each object once, names the ref in its
errors, and (with ``linear``) refuses a merge instead of silently following its first parent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pygit2

from gitaudit.errors import LedgerError


def walk(
    repo: pygit2.Repository,
    tip: pygit2.Oid | None,
    *,
    stop: pygit2.Oid | None = None,
    what: str = "ledger",
    linear: bool = False,
) -> Iterator[pygit2.Commit]:
    """The commits from *tip* back along first parents, newest first, ending before *stop* (or
    at the root). LedgerError for a missing object or one that is not a commit, or (``linear``)
    a merge. The parents are the ones stored when *repo* is a
    :class:`~gitaudit.git.repo.StoredHistory` (every ``Repo.git`` is), which no graft or shallow
    file can change."""
    current = tip
    while current is not None and current != stop:
        try:
            obj = repo.get(current)
        except (ValueError, pygit2.GitError) as exc:  # stored, but libgit2 cannot parse it
            raise LedgerError(
                f"{what}: commit {str(current)[:12]} cannot be read ({_why(exc)})",
                hint="restore the ref from a good copy or the reflog",
            ) from None
        if obj is None:
            raise LedgerError(
                f"{what}: commit {str(current)[:12]} is missing from the repository",
                hint="fetch the whole ledger (a shallow fetch of refs/audit/* cuts it): "
                "`git fetch --unshallow`, or `git fsck` when nothing was fetched shallow",
            )
        if not isinstance(obj, pygit2.Commit):
            raise LedgerError(
                f"{what}: {str(current)[:12]} is not a commit",
                hint="restore the ref from a good copy or the reflog",
            )
        if linear and len(obj.parent_ids) > 1:
            raise LedgerError(f"{what}: {str(current)[:12]} is a merge; audit refs are linear")
        yield obj
        current = obj.parent_ids[0] if obj.parent_ids else None


def _why(exc: Exception) -> str:
    """libgit2's reason, without the object id it starts with."""
    return str(exc).split(": ", 1)[-1][:200]


def segment(
    repo: pygit2.Repository,
    tip: pygit2.Oid,
    stop: pygit2.Oid | None,
    *,
    what: str = "ledger",
    linear: bool = False,
) -> tuple[list[pygit2.Commit], bool]:
    """The commits from *tip* back to *stop* (exclusive), newest first, and whether the walk
    reached *stop* (with *stop* None: the root, always)."""
    commits = list(walk(repo, tip, stop=stop, what=what, linear=linear))
    if stop is None or tip == stop:
        return commits, True
    return commits, bool(commits) and commits[-1].parent_ids[:1] == [stop]


def count(repo: pygit2.Repository, tip: pygit2.Oid, stop: pygit2.Oid | None = None) -> int:
    """How many commits :func:`walk` yields from *tip* to *stop*."""
    return sum(1 for _ in walk(repo, tip, stop=stop))
