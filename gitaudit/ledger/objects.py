"""Building and reading git trees of small files, in memory, without any index or work tree."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pygit2
from pygit2.enums import FileMode, ObjectType

from gitaudit.errors import LedgerError
from gitaudit.git import pack
from gitaudit.places import common_dir


def write_tree(repo: pygit2.Repository, files: Mapping[str, bytes]) -> pygit2.Oid:
    """A tree holding *files* (``"a/b.json" -> bytes``); folders are created as needed.

    The objects are built in memory. From :data:`~gitaudit.git.pack.PACK_FROM` distinct objects
    on (a large run's evidence) they are stored as one pack, whether or not some are stored
    already (a copy in a pack is harmless; ``git gc`` keeps one); fewer are written loose by
    libgit2, which skips those it has and checks each id against the one computed here. A name
    that is not plainly safe (:data:`_PLAIN_NAME`) sends the whole tree through libgit2's
    TreeBuilder, whose rules refuse ``.git`` in every spelling a checkout could misread."""
    root: dict[str, Any] = {}
    plain = True
    for path, data in files.items():
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise LedgerError(f"refusing to store the unsafe path {path!r} in a ledger tree")
        plain = plain and all(_PLAIN_NAME.fullmatch(p) for p in parts)
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise LedgerError(f"{path!r} collides with a file of the same name")
            node = child
        if parts[-1] in node:
            raise LedgerError(f"{path!r} is given twice")
        node[parts[-1]] = data
    if not plain:
        return _build_node(repo, root)
    objects: dict[bytes, tuple[int, bytes]] = {}
    top = _serialise(root, objects)
    if len(objects) >= pack.PACK_FROM:
        pack.write_pack(Path(common_dir(repo.path)) / "objects" / "pack", objects)
        oid = pygit2.Oid(raw=top)
        if oid not in repo.odb:  # looked up after a refresh of the pack list
            raise LedgerError(
                f"the pack of {len(objects)} objects written for tree {oid} is not in the "
                f"object database of {repo.path}",
                hint="check that objects/ (or the commondir of a linked worktree) is writable",
            )
        return oid
    for raw, (kind, data) in objects.items():
        _write_loose(repo, raw, kind, data)
    return pygit2.Oid(raw=top)


def _write_loose(repo: pygit2.Repository, raw: bytes, kind: int, data: bytes) -> None:
    """One object, written loose by libgit2 (nothing when it exists), whose id must be *raw*."""
    written = repo.odb.write(kind, data)
    if written.raw != raw:
        raise LedgerError(f"git stored an object as {written}, expected {raw.hex()}")


# names no checkout reads as anything else: ASCII (HFS+ ignores some code points), nothing that
# starts with ``.git`` in any case, no ``~`` (so no 8.3 short name such as ``GIT~1``)
_PLAIN_NAME = re.compile(r"(?![.][gG][iI][tT])[A-Za-z0-9_.-]+")


def _serialise(node: dict[str, Any], objects: dict[bytes, tuple[int, bytes]]) -> bytes:
    """The raw id of *node*'s tree; its objects (and its subtrees') added to *objects*."""
    entries = []
    for name, value in node.items():
        if isinstance(value, dict):
            entries.append((name, True, _serialise(value, objects)))
        else:
            oid = pack.object_id(pack.BLOB, value)
            objects.setdefault(oid, (pack.BLOB, value))
            entries.append((name, False, oid))
    data = pack.tree_data(entries)
    oid = pack.object_id(pack.TREE, data)
    objects.setdefault(oid, (pack.TREE, data))
    return oid


def _build_node(
    repo: pygit2.Repository, node: dict[str, Any], blobs: dict[bytes, pygit2.Oid] | None = None
) -> pygit2.Oid:
    blobs = {} if blobs is None else blobs  # identical contents (empty stdout...) written once
    builder = repo.TreeBuilder()
    for name, value in node.items():
        if isinstance(value, dict):
            builder.insert(name, _build_node(repo, value, blobs), FileMode.TREE)
        else:
            if value not in blobs:
                blobs[value] = repo.create_blob(value)
            builder.insert(name, blobs[value], FileMode.BLOB)
    oid = builder.write()
    assert isinstance(oid, pygit2.Oid)
    return oid


def read_files(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> dict[str, bytes]:
    """Every blob under *tree*, as ``path -> bytes``.

    LedgerError, naming the tree and the path, for an entry git never writes (``git fsck``
    names it), whose readers disagree. This walk keeps the last of two entries of one name and
    reads a name holding ``/`` as a path, while a lookup by path (:func:`blob_at`, which reads
    the trust set and the policy) splits the path into folders and searches each as if it were
    sorted: a plans commit could show the rules of a change one ``roles.json`` (listed twice,
    or a root entry named ``trust/roles.json`` beside the folder) and have the chain read
    another (a planner making itself a sealer). So a tree is read only as git writes them."""
    out: dict[str, bytes] = {}
    names: set[bytes] = set()
    last = b""
    for entry in tree:
        raw, mode, path = entry.raw_name or b"", entry.filemode, f"{prefix}{entry.name or ''}"
        key = raw + b"/" if mode == FileMode.TREE else raw  # git's order: a folder's name + /
        wrong = _unwritten(raw, mode, path, names, key <= last)
        obj: pygit2.Object | None = None
        if wrong is None:
            try:
                obj = repo[entry.id]
            except (KeyError, ValueError, pygit2.GitError):
                wrong = f"lists {path!r} ({entry.id}), which is missing or unreadable"
        if wrong is None and not isinstance(
            obj, pygit2.Tree if mode == FileMode.TREE else pygit2.Blob
        ):
            wrong = f"lists {path!r} with a mode ({mode:o}) not of its object"
        if wrong is not None:
            raise LedgerError(
                f"tree {str(tree.id)[:12]} {wrong}, which git never writes: a forged tree, "
                "whose readers could each take another entry",
                hint="restore the ref from a good copy (`git fsck` names the tree)",
            )
        names.add(raw)
        last = key
        if isinstance(obj, pygit2.Tree):
            out.update(read_files(repo, obj, f"{path}/"))
        elif isinstance(obj, pygit2.Blob):
            out[path] = obj.data
    return out


# the modes :func:`read_files` reads: folders, files and symbolic links (never a submodule)
_READ_MODES = frozenset((FileMode.TREE, FileMode.BLOB, FileMode.BLOB_EXECUTABLE, FileMode.LINK))


def _unwritten(raw: bytes, mode: int, path: str, names: set[bytes], behind: bool) -> str | None:
    """What git would not write about an entry named *raw* with *mode* (at *path*), given the
    names before it in its tree and whether it sorts *behind* the last; None when nothing."""
    if raw in names:
        return f"lists {path!r} twice"
    if raw in (b"", b".", b"..") or b"/" in raw:
        return f"has an entry named {path!r}"
    if behind:
        return f"lists {path!r} out of git's order"
    if mode not in _READ_MODES:
        return f"lists {path!r} as a submodule or with an odd mode ({mode:o})"
    return None


def blob_at(repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> bytes | None:
    """The bytes of the blob at *path* in *tree*, or None (no such entry, or not a blob: a
    submodule link names a commit of another repository, never read here). LedgerError naming
    the object when the tree lists a blob the repository does not have (a forged tree, or an
    object store that lost it)."""
    try:
        entry = tree[path]
    except KeyError:
        return None
    if entry.filemode == FileMode.COMMIT:
        return None
    try:  # the raw object: no pygit2 object is built for it
        kind, data = repo.odb.read(entry.id)
    except KeyError:  # pygit2.NotFoundError
        raise LedgerError(
            f"{path} ({entry.id}) in tree {str(tree.id)[:12]} is missing from the repository",
            hint="fetch the ref again, or restore it from a good copy or the reflog",
        ) from None
    return data if kind == ObjectType.BLOB else None


def tree_of(commit: pygit2.Commit, what: str) -> pygit2.Tree:
    """The root tree of *commit*; LedgerError naming both when the repository does not have it
    or cannot read it (a forged commit naming a tree that never existed)."""
    try:
        return commit.tree
    except (KeyError, ValueError, pygit2.GitError):
        raise LedgerError(
            f"{what} {str(commit.id)[:12]}: its tree {commit.tree_id} is missing or unreadable",
            hint="fetch the ref again, or restore it from a good copy or the reflog",
        ) from None


def _may_hold_surrogates(data: bytes | str) -> bool:
    """Whether parsing *data* can yield a surrogate: only through a ``\\u`` escape, or (bytes,
    which json decodes with ``surrogatepass``) an encoded surrogate, which starts with 0xED."""
    if isinstance(data, str):
        return "\\u" in data or any("\ud800" <= ch <= "\udfff" for ch in data)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:4]:
        return True  # UTF-16 or UTF-32 (json detects them): surrogates are plain code units
    # a one-byte search first (memchr): searching for the two bytes costs ten times as much
    return (b"\\" in data and b"\\u" in data) or b"\xed" in data


# a byte table: digits to "0", anything else to "." (finds a run of digits in one search)
_DIGIT_RUNS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_LONG_NUMBER = b"0" * 19  # an integer orjson would read as a float (beyond 64 bits) has 19+ digits


def loads(data: bytes | str) -> Any:
    """json.loads for ledger files: anything unparsable (including nesting deep enough to
    exhaust the parser) is a ValueError, which every caller turns into a precise error.

    UTF-8 bytes are read by orjson first (3x json's speed on a run record): what it accepts,
    json reads as the same values (differential fuzzing), except integers beyond 64 bits, which
    it reads as floats, so a text with 19 digits in a row goes to json. What orjson refuses
    (NaN, a lone surrogate, UTF-16, nesting past 1024) json reads or refuses, as it always did,
    and explains."""
    if isinstance(data, bytes) and data.translate(_DIGIT_RUNS).find(_LONG_NUMBER) < 0:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
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
    return (dumps_text(value) + "\n").encode()


def dumps_text(value: Any) -> str:
    """:func:`dumps` as text, without the final newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def commit_of(repo: pygit2.Repository, oid: pygit2.Oid, what: str) -> pygit2.Commit:
    try:
        obj = repo[oid]
    except KeyError as exc:
        raise LedgerError(
            f"{what} points at {oid}, which does not exist",
            hint="the object is not in this repository: fetch it, or restore the ref from a "
            "good copy or the reflog",
        ) from exc
    except ValueError as exc:  # stored, but libgit2 cannot parse it (pygit2.InvalidError)
        why = str(exc).split(": ", 1)[-1][:200]
        raise LedgerError(
            f"{what} points at {oid}, which cannot be read as a commit ({why})",
            hint="the ref was overwritten; restore it from a good copy or the reflog",
        ) from exc
    if not isinstance(obj, pygit2.Commit):
        raise LedgerError(
            f"{what} points at {str(oid)[:12]}, a {obj.type_str}, not a commit",
            hint="the ref was overwritten; restore it from a good copy or the reflog",
        )
    return obj
