"""``gitaudit.ledger.objects``: a blob read from a tree is its raw object (no pygit2 object is
built for it), with the answers ``repo[...]`` gave; ``loads`` refuses lone surrogates however
they are spelled, and only looks for them where they can be; it reads what json reads (orjson
first), value for value, and refuses what json refuses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pygit2.enums import ObjectType

from gitaudit.errors import LedgerError
from gitaudit.ledger.objects import (
    _may_hold_surrogates,
    blob_at,
    loads,
    read_files,
    tree_of,
    write_tree,
)


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
    """A blob entry naming a tree reads as no blob, and so does a submodule link (mode 160000,
    a commit of another repository, absent here); one naming an absent object is a
    LedgerError naming it (it raised KeyError, which status, log, show and run let through as a
    traceback)."""
    inner = write_tree(repo, {"x": b"1"})
    missing = pygit2.Oid(hex="1" * 40)
    raw = b"100644 gone\0" + missing.raw + b"160000 link\0" + missing.raw
    raw += b"100644 run.json\0" + inner.raw
    tree = repo[repo.odb.write(ObjectType.TREE, raw)]  # git would not write it
    assert isinstance(tree, pygit2.Tree)
    assert blob_at(repo, tree, "run.json") is None
    assert blob_at(repo, tree, "link") is None
    with pytest.raises(LedgerError) as caught:
        blob_at(repo, tree, "gone")
    assert caught.value.message == (
        f"gone ({missing}) in tree {str(tree.id)[:12]} is missing from the repository"
    )


@pytest.mark.parametrize("where", ["", "trust/"])
def test_read_files_refuses_a_name_listed_twice(repo: pygit2.Repository, where: str) -> None:
    """A tree listing a name twice (git never writes one) is refused: the walk kept the last
    entry while a lookup by path (:func:`blob_at`) can find the first, so two readers of one
    plans commit read two trust sets."""
    first, second = repo.create_blob(b"first\n"), repo.create_blob(b"second\n")
    raw = b"100644 roles.json\0" + first.raw + b"100644 roles.json\0" + second.raw
    tree = repo.odb.write(ObjectType.TREE, raw)
    if where:
        tree = repo.odb.write(ObjectType.TREE, b"40000 trust\0" + tree.raw)
    made = repo[tree]
    assert isinstance(made, pygit2.Tree)
    with pytest.raises(LedgerError) as caught:
        read_files(repo, made)
    assert f"lists '{where}roles.json' twice, which git never writes" in caught.value.message
    once = repo[write_tree(repo, {"trust/roles.json": b"x", "roles.json": b"y"})]
    assert isinstance(once, pygit2.Tree)
    assert read_files(repo, once) == {"trust/roles.json": b"x", "roles.json": b"y"}


UNWRITTEN = {  # a tree git would not write: its entries, and what read_files says of it
    "a name holding /": (
        [("40000", "trust", "folder"), ("100644", "trust/roles.json", "b")],
        "has an entry named 'trust/roles.json'",
    ),
    "the name .": ([("100644", ".", "a")], "has an entry named '.'"),
    "the name ..": ([("40000", "..", "folder")], "has an entry named '..'"),
    "out of order": (
        [("100644", "roles.json", "a"), ("100644", "allowed_signers", "b")],
        "lists 'allowed_signers' out of git's order",
    ),
    "a file and a folder of one name": (
        [("100644", "x", "a"), ("40000", "x", "folder")],
        "lists 'x' twice",
    ),
    "a folder sorted as a file": (
        [("40000", "x", "folder"), ("100644", "x.json", "a")],
        "lists 'x.json' out of git's order",
    ),
    "git's order of a folder": ([("100644", "x.json", "a"), ("40000", "x", "folder")], None),
    "a submodule naming a blob": (
        [("160000", "roles.json", "a")],
        "lists 'roles.json' as a submodule or with an odd mode (160000)",
    ),
    "a folder naming a blob": (
        [("40000", "trust", "a")],
        "lists 'trust' with a mode (40000) not of its object",
    ),
    "a file naming a folder": (
        [("100644", "trust", "folder")],
        "lists 'trust' with a mode (100644) not of its object",
    ),
    "a file naming nothing": (
        [("100644", "roles.json", "missing")],
        f"lists 'roles.json' ({'1' * 40}), which is missing or unreadable",
    ),
}


@pytest.mark.parametrize("kind", UNWRITTEN)
def test_read_files_reads_a_tree_only_as_git_writes_them(
    repo: pygit2.Repository, kind: str
) -> None:
    """Every entry git would not write (``git fsck`` names it) is refused, naming the tree and
    the path: a walk and a lookup by path read such a tree differently (a name holding ``/``
    reads as a path to the walk and is never found by the lookup; an entry out of order is
    missed by the lookup's binary search). A tree git writes reads as it always did."""
    objects = {
        "a": repo.create_blob(b"a\n"),
        "b": repo.create_blob(b"b\n"),
        "folder": write_tree(repo, {"roles.json": b"c\n"}),
        "missing": pygit2.Oid(hex="1" * 40),
    }
    entries, said = UNWRITTEN[kind]
    raw = b"".join(f"{m} {n}".encode() + b"\0" + objects[o].raw for m, n, o in entries)
    tree = repo[repo.odb.write(ObjectType.TREE, raw)]
    assert isinstance(tree, pygit2.Tree)
    if said is None:  # git's own order: x.json before x/, since '.' < '/'
        assert read_files(repo, tree) == {"x/roles.json": b"c\n", "x.json": b"a\n"}
        return
    with pytest.raises(LedgerError) as caught:
        read_files(repo, tree)
    assert caught.value.message == (
        f"tree {str(tree.id)[:12]} {said}, which git never writes: a forged tree, whose "
        "readers could each take another entry"
    )


def test_tree_of_a_commit_whose_tree_is_missing(repo: pygit2.Repository) -> None:
    """pygit2 raised GitError ("Unable to read tree") from ``commit.tree``."""
    who = "f <f@example.test> 1700000000 +0000"
    raw = f"tree {'3' * 40}\nauthor {who}\ncommitter {who}\n\nforged\n".encode()
    commit = repo[repo.odb.write(ObjectType.COMMIT, raw)]
    assert isinstance(commit, pygit2.Commit)
    with pytest.raises(LedgerError) as caught:
        tree_of(commit, "run")
    assert caught.value.message == (
        f"run {str(commit.id)[:12]}: its tree {'3' * 40} is missing or unreadable"
    )


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


def _json_reading(data: bytes) -> tuple[str, ...]:
    """What :func:`loads` gave when it was json alone: the value (its repr: 1 and 1.0, -0.0
    and 0.0 differ), or an error for what json refuses and for a lone surrogate."""
    try:
        value = json.loads(data)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        return ("error",)
    return ("value", repr(value), repr(type(value)))


def _reading(data: bytes) -> tuple[str, ...]:
    try:
        value = loads(data)
    except ValueError:
        return ("error",)
    return ("value", repr(value), repr(type(value)))


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson would read those as floats
    | st.floats(allow_nan=True, allow_infinity=True)  # NaN, Infinity: json only
    | st.text(st.characters(codec="utf-8"), max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)
# what a mutation inserts or writes over: JSON's own bytes, escapes, a surrogate's UTF-8 lead
# byte, invalid UTF-8, NUL, and a BOM's first byte
_NOISE = st.sampled_from(list(b'{}[]:,"\\/0123456789-+.eEtrufalsnNI \t\n\xed\xa0\x80\xff\x00\xef'))


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, indent=st.sampled_from([None, 2]), ascii_only=st.booleans())
@example(value=2**64, indent=None, ascii_only=True)
@example(value=-(2**63) - 1, indent=None, ascii_only=True)
@example(value=[10**30, "1234567890123456789"], indent=2, ascii_only=True)
@example(value={"a": 1, "b": [1.0, -0.0, 1e300]}, indent=None, ascii_only=False)
def test_loads_reads_what_json_reads(value: Any, indent: int | None, ascii_only: bool) -> None:
    """Every value json writes, loads reads back as json does: the same value of the same
    type (a 20-digit integer stays an integer; NaN and Infinity, which orjson refuses, read)."""
    data = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    assert _reading(data) == _json_reading(data)


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1, "a": 2}',  # a duplicate key: the last wins
        '\ufeff{"a": 1}'.encode(),  # a byte order mark
        '{"a": 1}'.encode("utf-16"),  # UTF-16, which json detects
        b'"\\ud800"',  # a lone surrogate, escaped
        '"\ud800"'.encode("utf-8", "surrogatepass"),  # and encoded
        b"[" * 5000 + b"]" * 5000,  # nesting past both parsers' limits
        b'{"n": 123456789012345678901234567890}',  # beyond 64 bits
        b'{"n": -9223372036854775809}',
        b"[NaN, Infinity, -Infinity]",
        b'{"a": 1} x',
    ],
)
def test_loads_reads_and_refuses_as_json_did(text: bytes) -> None:
    assert _reading(text) == _json_reading(text)


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_loads_refuses_what_json_refuses(data: st.DataObject) -> None:
    """Mutated JSON (bytes inserted, removed, overwritten): loads reads what json read before
    orjson was put in front of it, the same values, and refuses the same texts."""
    text = bytearray(json.dumps(data.draw(_VALUES)).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        how = data.draw(st.sampled_from(["insert", "delete", "overwrite"]))
        if how == "insert":
            text[at:at] = bytes([data.draw(_NOISE)])
        elif at < len(text):
            text[at : at + 1] = b"" if how == "delete" else bytes([data.draw(_NOISE)])
    assert _reading(bytes(text)) == _json_reading(bytes(text))


# ------------------------------------------------------------------ storing: loose or one pack


def _evidence(steps: int, salt: str = "") -> dict[str, bytes]:
    """A run's file map in miniature: per step a result, one check's result and its streams."""
    files = {"run.json": f'{{"salt": "{salt}"}}\n'.encode(), "summary.md": b"# run\n"}
    for n in range(steps):
        root = f"steps/s{n:03d}"
        files[f"{root}/result.json"] = b'{"step": %d}\n' % n
        files[f"{root}/checks/0/result.json"] = b'{"check": %d}\n' % n
        files[f"{root}/checks/0/stdout"] = b"ok %d\n" % n
        files[f"{root}/checks/0/stderr"] = b""
    return files


def _packs(repo: pygit2.Repository) -> list[Path]:
    return sorted((Path(repo.path) / "objects" / "pack").glob("*"))


def _loose(repo: pygit2.Repository) -> int:
    objects = Path(repo.path) / "objects"
    return sum(1 for d in objects.iterdir() if len(d.name) == 2 for _ in d.iterdir())


def _builder_tree(tmp_path: Path, files: dict[str, bytes]) -> pygit2.Oid:
    """The same files through libgit2's TreeBuilder, in a repository of their own."""
    from gitaudit.ledger.objects import _build_node

    other = pygit2.init_repository(str(tmp_path / "builder.git"), bare=True)
    root: dict[str, object] = {}
    for path, data in files.items():
        *folders, name = path.split("/")
        node = root
        for folder in folders:
            node = node.setdefault(folder, {})  # type: ignore[assignment]
        node[name] = data
    return _build_node(other, root)


def test_a_large_tree_is_one_pack_git_accepts(repo: pygit2.Repository, tmp_path: Path) -> None:
    """A 200-step run's ~1,000 objects: one pack and its index, no loose object, the same tree
    id libgit2's TreeBuilder gives, and git's strictest check finds nothing wrong."""
    files = _evidence(200)
    tree = write_tree(repo, files)
    assert tree == _builder_tree(tmp_path, files)
    packs = _packs(repo)
    assert [p.suffix for p in packs] == [".idx", ".pack"], packs
    assert {p.stem for p in packs} == {packs[0].stem}
    assert all(p.stat().st_mode & 0o777 == 0o444 for p in packs)
    assert _loose(repo) == 0
    git = ["git", "--git-dir", repo.path]
    subprocess.run([*git, "fsck", "--strict", "--no-dangling"], check=True, capture_output=True)
    listed = subprocess.run(
        [*git, "verify-pack", "-v", str(packs[0])], check=True, capture_output=True, text=True
    ).stdout
    kinds = [line.split()[1] for line in listed.splitlines() if len(line.split()) >= 5]
    assert kinds.count("tree") == 1 + 1 + 200 * 3  # root, steps/, and per step: s, checks, 0
    assert kinds.count("blob") == len(set(files.values()))  # identical contents stored once
    shown = subprocess.run(
        [*git, "show", f"{tree}:steps/s123/checks/0/stdout"], check=True, capture_output=True
    )
    assert shown.stdout == b"ok 123\n"
    read = repo[tree]  # this process finds the new pack too
    assert isinstance(read, pygit2.Tree)
    assert blob_at(repo, read, "steps/s199/result.json") == b'{"step": 199}\n'


def test_a_small_tree_stays_loose(repo: pygit2.Repository, tmp_path: Path) -> None:
    """Below git's unpack limit (100 objects) every object is loose, as libgit2 writes it."""
    files = _evidence(10)
    tree = write_tree(repo, files)
    assert tree == _builder_tree(tmp_path, files)
    assert _packs(repo) == []
    assert _loose(repo) == 2 + 10 * 3 + len(set(files.values())) < 100
    subprocess.run(
        ["git", "--git-dir", repo.path, "fsck", "--strict", "--no-dangling"],
        check=True,
        capture_output=True,
    )


def test_the_same_large_tree_twice_is_one_pack(repo: pygit2.Repository) -> None:
    """Identical evidence (two runs of one tree in the same second) names the same pack: the
    second write replaces it with the same bytes and leaves nothing behind."""
    first = write_tree(repo, _evidence(50))
    second = write_tree(repo, _evidence(50))
    assert first == second
    assert len(_packs(repo)) == 2
    third = write_tree(repo, _evidence(50, salt="other run"))
    assert third != first
    assert len(_packs(repo)) == 4
    assert not [p for p in _packs(repo) if p.name.startswith("tmp_")]


@pytest.mark.parametrize("name", [".git", ".GIT", "git~1", ".git.", "GIT~1", ".git "])
def test_names_a_checkout_could_misread_are_refused_on_either_path(
    repo: pygit2.Repository, name: str
) -> None:
    """A name outside the plain set goes through libgit2's TreeBuilder, which refuses ``.git``
    in its NTFS and HFS spellings: for a small tree and for one large enough to pack."""
    for files in ({f"outputs/{name}/stdout": b""}, {**_evidence(50), f"x/{name}": b"1"}):
        with pytest.raises(pygit2.GitError, match="invalid name"):
            write_tree(repo, files)
    assert _packs(repo) == []


@pytest.mark.parametrize("name", ["é", "a b", ".gitignore", "a:b"])
def test_other_names_are_stored_through_libgit2(
    repo: pygit2.Repository, tmp_path: Path, name: str
) -> None:
    files = {**_evidence(50), f"outputs/{name}/stdout": b"x"}
    tree = write_tree(repo, files)
    assert tree == _builder_tree(tmp_path, files)
    assert _packs(repo) == []  # TreeBuilder writes loose
    assert blob_at(repo, repo[tree], f"outputs/{name}/stdout") == b"x"  # type: ignore[arg-type]


def test_a_linked_worktree_packs_into_the_common_object_database(tmp_path: Path) -> None:
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(
        ["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "linked")], check=True
    )
    linked = pygit2.Repository(str(tmp_path / "linked"))
    assert "worktrees" in linked.path
    tree = write_tree(linked, _evidence(100))
    assert len(list((main / ".git" / "objects" / "pack").glob("*.idx"))) == 1
    assert not (Path(linked.path) / "objects").exists()
    shown = subprocess.run(
        ["git", "-C", str(main), "cat-file", "-t", str(tree)], check=True, capture_output=True
    )
    assert shown.stdout == b"tree\n"


def test_a_failed_pack_write_leaves_no_debris(
    repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fails mid-write (here: the pack's fsync) raises OSError, which the ledgers
    report as nothing recorded, and leaves no temporary file, pack or index behind."""

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gitaudit.git.pack.os.fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_tree(repo, _evidence(50))
    assert _packs(repo) == []
