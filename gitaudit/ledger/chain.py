"""Walking a ledger: the first-parent chain of an audit ref, newest first.

Audit refs are linear chains of commits (each run or plans commit has at most one parent). Every
walk over one goes through :func:`walk` (or :func:`walk_ids`), which reads each object once,
names the ref in its errors, and (with ``linear``) refuses a merge instead of silently following
its first parent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pygit2
from pygit2.enums import ObjectType

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
        obj = read_commit(repo, current, what)
        if linear and len(obj.parent_ids) > 1:
            raise LedgerError(f"{what}: {str(current)[:12]} is a merge; audit refs are linear")
        yield obj
        current = obj.parent_ids[0] if obj.parent_ids else None


def read_commit(repo: pygit2.Repository, oid: pygit2.Oid, what: str) -> pygit2.Commit:
    """Commit *oid* of the chain of *what*; LedgerError when it is missing, is no commit, or
    libgit2 cannot parse it."""
    try:
        obj = repo.get(oid)
    except (ValueError, pygit2.GitError) as exc:  # stored, but libgit2 cannot parse it
        raise LedgerError(
            f"{what}: commit {str(oid)[:12]} cannot be read ({_why(exc)})",
            hint="restore the ref from a good copy or the reflog",
        ) from None
    if obj is None:
        raise LedgerError(
            f"{what}: commit {str(oid)[:12]} is missing from the repository",
            hint=_MISSING_HINT,
        )
    if not isinstance(obj, pygit2.Commit):
        raise LedgerError(
            f"{what}: {str(oid)[:12]} is not a commit",
            hint="restore the ref from a good copy or the reflog",
        )
    return obj


_MISSING_HINT = (
    "fetch the whole ledger (a shallow fetch of refs/audit/* cuts it): "
    "`git fetch --unshallow`, or `git fsck` when nothing was fetched shallow"
)


def walk_ids(
    repo: pygit2.Repository,
    tip: pygit2.Oid | None,
    *,
    stop: pygit2.Oid | None = None,
    what: str = "ledger",
    linear: bool = False,
) -> Iterator[pygit2.Oid]:
    """:func:`walk`'s commit ids, read from the raw objects: libgit2's object cache then holds
    each one raw, which is how verifying its signature reads it next (a parsed commit in the
    cache does not serve a raw read: the commit would be inflated again). The parents are the
    ``parent`` lines right after the ``tree`` line, where git and libgit2 read them; a commit
    whose headers start otherwise cannot be read. The reader of each id parses it
    (:func:`read_commit`), which refuses one libgit2 cannot parse."""
    for oid, _raw in walk_raw(repo, tip, stop=stop, what=what, linear=linear):
        yield oid


def walk_raw(
    repo: pygit2.Repository,
    tip: pygit2.Oid | None,
    *,
    stop: pygit2.Oid | None = None,
    what: str = "ledger",
    linear: bool = False,
) -> Iterator[tuple[pygit2.Oid, bytes]]:
    """:func:`walk_ids` with each commit's raw bytes, as libgit2 read them: it hashes every
    object it reads against its id, so a forged object stored under a ledger commit's name (a
    loose file rewritten, an alternate store, another pack) is refused here. git checks no
    object's id on read, so a search of the ledger by git (``rev-list --grep``) read the forgery.
    """
    current = tip
    while current is not None and current != stop:
        try:
            kind, raw = repo.odb.read(current)
        except KeyError:  # pygit2.NotFoundError
            raise LedgerError(
                f"{what}: commit {str(current)[:12]} is missing from the repository",
                hint=_MISSING_HINT,
            ) from None
        except (ValueError, pygit2.GitError) as exc:
            raise LedgerError(
                f"{what}: commit {str(current)[:12]} cannot be read ({_why(exc)})",
                hint="restore the ref from a good copy or the reflog",
            ) from None
        if kind != ObjectType.COMMIT:
            raise LedgerError(
                f"{what}: {str(current)[:12]} is not a commit",
                hint="restore the ref from a good copy or the reflog",
            )
        parents = _parents(raw)
        if parents is None:
            raise LedgerError(
                f"{what}: commit {str(current)[:12]} cannot be read (malformed headers)",
                hint="restore the ref from a good copy or the reflog",
            )
        if linear and len(parents) > 1:
            raise LedgerError(f"{what}: {str(current)[:12]} is a merge; audit refs are linear")
        yield current, raw
        current = parents[0] if parents else None


def _parents(raw: bytes) -> list[pygit2.Oid] | None:
    """The parents commit *raw* names, or None when it does not start with a ``tree`` line.
    SHA-1 ids: the object format libgit2 opens (a SHA-256 repository is refused at open)."""
    if not raw.startswith(b"tree ") or raw[45:46] != b"\n":
        return None
    parents: list[pygit2.Oid] = []
    at = 46
    try:
        while raw.startswith(b"parent ", at) and raw[at + 47 : at + 48] == b"\n":
            parents.append(pygit2.Oid(hex=raw[at + 7 : at + 47].decode("ascii")))
            at += 48
        pygit2.Oid(hex=raw[5:45].decode("ascii"))  # the tree's id is one
    except (ValueError, UnicodeDecodeError):
        return None
    return parents


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
