"""``gitaudit.ledger.objects``: a blob read from a tree is its raw object (no pygit2 object is
built for it), with the answers ``repo[...]`` gave; ``loads`` refuses lone surrogates however
they are spelled, and only looks for them where they can be."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.ledger.objects import _may_hold_surrogates, blob_at, loads, write_tree


@pytest.fixture
def repo(tmp_path: Path) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path / "r.git"), bare=True)


def test_blob_at_reads_a_blob_and_nothing_else(repo: pygit2.Repository) -> None:
    tree = repo[write_tree(repo, {"run.json": b"{}\n", "steps/a/stdout": b""})]
    assert isinstance(tree, pygit2.Tree)
    assert blob_at(repo, tree, "run.json") == b"{}\n"
    assert blob_at(repo, tree, "steps/a/stdout") == b""
    assert blob_at(repo, tree, "steps") is None  # a tree
    assert blob_at(repo, tree, "steps/b/stdout") is None
    assert blob_at(repo, tree, "run.json/x") is None


def test_blob_at_an_entry_that_lies_about_its_object(repo: pygit2.Repository) -> None:
    """A blob entry naming a tree reads as no blob; one naming an absent object raises
    KeyError (the object database is damaged), as ``repo[...]`` raises it."""
    inner = write_tree(repo, {"x": b"1"})
    missing = pygit2.Oid(hex="1" * 40)
    raw = b"100644 gone\0" + missing.raw + b"100644 run.json\0" + inner.raw
    tree = repo[repo.odb.write(ObjectType.TREE, raw)]  # git would not write it
    assert isinstance(tree, pygit2.Tree)
    assert blob_at(repo, tree, "run.json") is None
    with pytest.raises(KeyError) as caught:
        blob_at(repo, tree, "gone")
    assert type(caught.value) is KeyError and caught.value.args == (missing,)


@pytest.mark.parametrize(
    ("data", "may"),
    [
        (b'{"a": "b"}', False),
        (b'{"a": "\\\\"}', False),  # a backslash, but no \u escape
        (b'{"a": "\\u00e9"}', True),
        (b'{"a": "\\\\u"}', True),  # an escaped backslash then u: looked at anyway (harmless)
        ('{"a": "é"}'.encode(), False),
        ('{"a": "\ud55c"}'.encode(), True),  # 0xED lead byte: an encoded surrogate is one
    ],
)
def test_surrogates_are_looked_for_where_they_can_be(data: bytes, may: bool) -> None:
    assert _may_hold_surrogates(data) is may


def test_loads_refuses_a_lone_surrogate() -> None:
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        loads(b'{"a": "\\ud800"}')
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        loads('{"a": "\ud800"}'.encode("utf-8", "surrogatepass"))
    assert loads(b'{"a": "\\u00e9\\\\"}') == {"a": "é\\"}
