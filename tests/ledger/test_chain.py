"""``gitaudit.ledger.chain``: the one walk over a ledger, and its linearity rule."""

from __future__ import annotations

import pygit2
import pytest

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


def test_a_missing_commit_or_a_non_commit_is_named(git: pygit2.Repository) -> None:
    blob = git.create_blob(b"not a commit")
    with pytest.raises(LedgerError, match=rf"^plans: {str(blob)[:12]} is not a commit$"):
        list(chain.walk(git, blob, what="plans"))
    missing = pygit2.Oid(hex="1" * 40)
    with pytest.raises(LedgerError, match=r"^ledger: commit 111111111111 is missing") as caught:
        list(chain.walk(git, missing))
    assert caught.value.hint == (
        "fetch the whole ledger (a shallow fetch of refs/audit/* cuts it): `git fetch "
        "--unshallow`, or `git fsck` when nothing was fetched shallow"
    )
