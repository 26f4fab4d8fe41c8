"""``gitaudit.ledger.chain``: the one walk over a ledger, and its linearity rule; the walk of
ids from raw objects (``walk_ids``) follows the same parents, with the same errors."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.errors import LedgerError
from gitaudit.git.repo import open_repo
from gitaudit.ledger import chain
from tests.gitrepo import GitRepo


def _commit(git: pygit2.Repository, parents: list[pygit2.Oid], message: str) -> pygit2.Oid:
    who = pygit2.Signature("t", "t@example.test", 1_700_000_000, 0)
    tree = git.TreeBuilder().write()
    return git.create_commit(None, who, who, message, tree, parents)


@pytest.fixture
def git(repo: GitRepo) -> pygit2.Repository:
    return open_repo(repo.path).git


def test_walk_is_newest_first_and_stops_before_stop(git: pygit2.Repository) -> None:
    a = _commit(git, [], "a")
    b = _commit(git, [a], "b")
    c = _commit(git, [b], "c")
    assert [x.id for x in chain.walk(git, c)] == [c, b, a]
    assert [x.id for x in chain.walk(git, c, stop=a)] == [c, b]
    assert [x.id for x in chain.walk(git, c, stop=c)] == []
    assert list(chain.walk(git, None)) == []
    assert chain.count(git, c) == 3
    assert chain.count(git, c, a) == 2


def test_a_linear_walk_refuses_a_merge_by_name(git: pygit2.Repository) -> None:
    """Audit refs are linear: a merge would let a walk of first parents skip whatever its other
    parents bring (an unsigned forgery, say). With ``linear`` it is an error naming the merge,
    wherever it is in the chain; without, the first parents are followed."""
    base = _commit(git, [], "base")
    side = _commit(git, [base], "side: all passed")
    merge = _commit(git, [base, side], "merge")
    tip = _commit(git, [merge], "tip")
    assert [x.id for x in chain.walk(git, tip)] == [tip, merge, base]
    walked: list[pygit2.Oid] = []
    with pytest.raises(LedgerError, match=rf"^runs: {str(merge)[:12]} is a merge; audit refs are"):
        walked.extend(x.id for x in chain.walk(git, tip, what="runs", linear=True))
    assert walked == [tip]  # the merge itself is never yielded
    with pytest.raises(LedgerError, match="is a merge"):
        chain.segment(git, tip, base, linear=True)
    # above the stop, a merge below it is never read
    assert [x.id for x in chain.walk(git, tip, stop=merge, linear=True)] == [tip]


def test_segment_says_whether_the_walk_reached_stop(git: pygit2.Repository) -> None:
    a = _commit(git, [], "a")
    b = _commit(git, [a], "b")
    c = _commit(git, [b], "c")
    other = _commit(git, [], "another root")

    def ids(found: tuple[list[pygit2.Commit], bool]) -> tuple[list[pygit2.Oid], bool]:
        return [x.id for x in found[0]], found[1]

    assert ids(chain.segment(git, c, a)) == ([c, b], True)
    assert chain.segment(git, c, None)[1] is True
    assert ids(chain.segment(git, c, c)) == ([], True)
    assert ids(chain.segment(git, c, other)) == ([c, b, a], False)
    assert ids(chain.segment(git, a, c)) == ([a], False)  # backwards: c is never reached


def _walk_ids(git: pygit2.Repository, tip: pygit2.Oid | None, **how: Any) -> list[pygit2.Oid]:
    return [c.id for c in chain.walk(git, tip, **how)]


def _raw_walk_ids(git: pygit2.Repository, tip: pygit2.Oid | None, **how: Any) -> list[pygit2.Oid]:
    return list(chain.walk_ids(git, tip, **how))


Walk = Callable[..., list[pygit2.Oid]]


@pytest.mark.parametrize("ids", [_walk_ids, _raw_walk_ids], ids=["walk", "walk_ids"])
def test_a_missing_commit_or_a_non_commit_is_named(git: pygit2.Repository, ids: Walk) -> None:
    """Both walks: the same errors, word for word."""
    blob = git.create_blob(b"not a commit")
    with pytest.raises(LedgerError, match=rf"^plans: {str(blob)[:12]} is not a commit$"):
        ids(git, blob, what="plans")
    missing = pygit2.Oid(hex="1" * 40)
    with pytest.raises(LedgerError, match=r"^ledger: commit 111111111111 is missing") as caught:
        ids(git, missing)
    assert caught.value.hint == (
        "fetch the whole ledger (a shallow fetch of refs/audit/* cuts it): `git fetch "
        "--unshallow`, or `git fsck` when nothing was fetched shallow"
    )


def _raw(git: pygit2.Repository, headers: list[bytes], message: bytes = b"m\n") -> pygit2.Oid:
    """A commit object written byte for byte: *headers*, a blank line, *message*."""
    return git.odb.write(ObjectType.COMMIT, b"\n".join(headers) + b"\n\n" + message)


def test_walk_ids_follows_the_parents_libgit2_reads(git: pygit2.Repository) -> None:
    """The raw walk reads the ``parent`` lines right after the ``tree`` line, as libgit2 and
    git do; on a chain of commits laid out every way libgit2 parses (extra headers, an
    encoding, a signature after the committer, a message that names a parent), it yields the
    ids the parsed walk yields, and refuses the same merge."""
    tree = git.TreeBuilder().write()
    who = b"t <t@example.test> 1700000000 +0000"
    root = _commit(git, [], "root")
    plain = _commit(git, [root], "plain")
    extra = _raw(git, [b"tree %s" % str(tree).encode(), b"parent %s" % str(plain).encode(),
                       b"author " + who, b"committer " + who, b"encoding ISO-8859-1",
                       b"x-header value", b"gpgsig -----BEGIN SSH SIGNATURE-----",
                       b" AAAA", b" -----END SSH SIGNATURE-----"])  # fmt: skip
    named = _raw(git, [b"tree %s" % str(tree).encode(), b"parent %s" % str(extra).encode(),
                       b"author " + who, b"committer " + who],
                 b"parent %s\n" % str(root).encode())  # fmt: skip
    assert isinstance(git.get(extra), pygit2.Commit)  # libgit2 parses every one of them
    assert isinstance(git.get(named), pygit2.Commit)
    assert _raw_walk_ids(git, named) == _walk_ids(git, named) == [named, extra, plain, root]
    merge = _raw(git, [b"tree %s" % str(tree).encode(), b"parent %s" % str(named).encode(),
                       b"parent %s" % str(root).encode(), b"author " + who,
                       b"committer " + who])  # fmt: skip
    tip = _commit(git, [merge], "tip")
    for walk in (_walk_ids, _raw_walk_ids):
        with pytest.raises(LedgerError, match=rf"^runs: {str(merge)[:12]} is a merge"):
            walk(git, tip, what="runs", linear=True)
        assert walk(git, tip) == [tip, merge, named, extra, plain, root]


def test_walk_ids_refuses_headers_that_do_not_start_with_a_tree(git: pygit2.Repository) -> None:
    """A commit whose first line is no ``tree`` line (libgit2 cannot parse it either) cannot be
    read; a ``parent`` line after other headers is no parent (git ignores it, libgit2 refuses
    the object, which whoever reads the id next says)."""
    tree = git.TreeBuilder().write()
    root = _commit(git, [], "root")
    who = b"t <t@example.test> 1700000000 +0000"
    no_tree = _raw(git, [b"parent %s" % str(root).encode(), b"tree %s" % str(tree).encode(),
                         b"author " + who, b"committer " + who])  # fmt: skip
    with pytest.raises(LedgerError, match=rf"^runs: commit {str(no_tree)[:12]} cannot be read"):
        _raw_walk_ids(git, no_tree, what="runs")
    with pytest.raises(LedgerError, match=rf"^runs: commit {str(no_tree)[:12]} cannot be read"):
        _walk_ids(git, no_tree, what="runs")
    late = _raw(git, [b"tree %s" % str(tree).encode(), b"author " + who,
                      b"parent %s" % str(root).encode(), b"committer " + who])  # fmt: skip
    assert _raw_walk_ids(git, late) == [late]
    with pytest.raises(LedgerError, match=rf"^runs: commit {str(late)[:12]} cannot be read"):
        chain.read_commit(git, late, "runs")


def test_walk_raw_yields_the_stored_bytes_and_refuses_a_forged_object(
    git: pygit2.Repository, repo: GitRepo
) -> None:
    """``walk_raw`` gives each commit's bytes as stored (control), and refuses, naming it, a
    commit whose loose file holds other bytes than its id (which git's own walk reads)."""
    a = _commit(git, [], "a\n\nAudit-Tree: t\n")
    b = _commit(git, [a], "b")
    walked = list(chain.walk_raw(git, b, what="runs"))
    assert [oid for oid, _ in walked] == [b, a]
    assert [raw for _, raw in walked] == [git.odb.read(b)[1], git.odb.read(a)[1]]
    forged = git.odb.read(a)[1].replace(b"Audit-Tree: t\n", b"nothing\n")
    loose = repo.path / ".git" / "objects" / str(a)[:2] / str(a)[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"commit %d\x00" % len(forged) + forged))
    assert "Audit-Tree" not in repo.git("log", "-1", "--format=%B", str(a))  # git reads it
    fresh = open_repo(repo.path).git
    with pytest.raises(LedgerError, match=rf"^runs: commit {str(a)[:12]} cannot be read"):
        list(chain.walk_raw(fresh, b, what="runs"))
