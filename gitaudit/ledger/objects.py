"""Building and reading git trees of small files, in memory, without any index or work tree."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pygit2
from pygit2.enums import FileMode, ObjectType

from gitaudit.errors import LedgerError


def write_tree(repo: pygit2.Repository, files: Mapping[str, bytes]) -> pygit2.Oid:
    """A tree holding *files* (``"a/b.json" -> bytes``); folders are created as needed."""
    root: dict[str, Any] = {}
    for path, data in files.items():
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise LedgerError(f"refusing to store the unsafe path {path!r} in a ledger tree")
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise LedgerError(f"{path!r} collides with a file of the same name")
            node = child
        if parts[-1] in node:
            raise LedgerError(f"{path!r} is given twice")
        node[parts[-1]] = data
    return _write_node(repo, root)


def _write_node(
    repo: pygit2.Repository, node: dict[str, Any], blobs: dict[bytes, pygit2.Oid] | None = None
) -> pygit2.Oid:
    blobs = {} if blobs is None else blobs  # identical contents (empty stdout...) written once
    builder = repo.TreeBuilder()
    for name, value in node.items():
        if isinstance(value, dict):
            builder.insert(name, _write_node(repo, value, blobs), FileMode.TREE)
        else:
            if value not in blobs:
                blobs[value] = repo.create_blob(value)
            builder.insert(name, blobs[value], FileMode.BLOB)
    oid = builder.write()
    assert isinstance(oid, pygit2.Oid)
    return oid


def read_files(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> dict[str, bytes]:
    """Every blob under *tree*, as ``path -> bytes``."""
    out: dict[str, bytes] = {}
    for entry in tree:
        path = f"{prefix}{entry.name}"
        obj = repo[entry.id]
        if isinstance(obj, pygit2.Tree):
            out.update(read_files(repo, obj, f"{path}/"))
        elif isinstance(obj, pygit2.Blob):
            out[path] = obj.data
    return out


def blob_at(repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> bytes | None:
    """The bytes of the blob at *path* in *tree*, or None."""
    try:
        entry = tree[path]
    except KeyError:
        return None
    try:  # the raw object: no pygit2 object is built for it
        kind, data = repo.odb.read(entry.id)
    except KeyError:  # pygit2.NotFoundError, also a GitError: raised as repo[...] raises it
        raise KeyError(entry.id) from None
    return data if kind == ObjectType.BLOB else None


def _may_hold_surrogates(data: bytes | str) -> bool:
    """Whether parsing *data* can yield a surrogate: only through a ``\\u`` escape, or (bytes,
    which json decodes with ``surrogatepass``) an encoded surrogate, which starts with 0xED."""
    if isinstance(data, str):
        return "\\u" in data or any("\ud800" <= ch <= "\udfff" for ch in data)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:4]:
        return True  # UTF-16 or UTF-32 (json detects them): surrogates are plain code units
    # a one-byte search first (memchr): searching for the two bytes costs ten times as much
    return (b"\\" in data and b"\\u" in data) or b"\xed" in data


def loads(data: bytes | str) -> Any:
    """json.loads for ledger files: anything unparsable (including nesting deep enough to
    exhaust the parser) is a ValueError, which every caller turns into a precise error."""
    try:
        value = json.loads(data)
        # lone surrogates ("\ud800") parse, but are not text: SQLite, RFC 8785 and UTF-8 refuse
        if _may_hold_surrogates(data):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate") from None
    return value


def dumps(value: Any) -> bytes:
    """Stable, readable JSON for ledger files (sorted keys, 2-space indent, final newline)."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def commit_of(repo: pygit2.Repository, oid: pygit2.Oid, what: str) -> pygit2.Commit:
    try:
        obj = repo[oid]
    except (KeyError, ValueError) as exc:
        raise LedgerError(f"{what} points at {oid}, which does not exist") from exc
    if not isinstance(obj, pygit2.Commit):
        raise LedgerError(
            f"{what} points at {str(oid)[:12]}, a {obj.type_str}, not a commit",
            hint="the ref was overwritten; restore it from a good copy or the reflog",
        )
    return obj
