"""Input digests: what a step's evidence depends on, so unchanged evidence can be carried.

A step's input digest is sha256 over: its step-contract digest, which also covers the plan-level
settings the step runs under (so a reseal that changes the step, what its checks may read
beyond the tree, or the tools every run must find, reopens it, and one that does not keeps it:
versioned proofs); the ``mode path
blob`` lines of the
workspace files its ``inputs`` globs cover (a path that could read as more than one line, or
is not UTF-8, JSON-quoted: :func:`_written`) — or the whole tree id when it declares none (it
depends on everything); and the input digests of every step it depends on (so a changed
dependency reopens its dependants). Two runs with the same input digest for a step would run the
same checks against the same bytes.

**Cost: one pass at most.** The tree is read lazily (a step whose globs name a folder reads that
folder's subtree), and the globs of all steps are matched together: each path is tried only
against the globs whose literal prefix it starts with and whose literal end it ends with. So a
plan of many steps costs about one walk over the part of the tree its globs can reach, not one per
step (paths with a ``.`` or ``..`` part, which git refuses to check out, are normalised first, as
:func:`matches_input` does). That walk reads each tree object's raw bytes in C (a regular
expression; pygit2 reads any tree git would not write, entry by entry) and matches the paths of
a glob without a literal suffix in one C pass: on 50,000 files, 100 steps' digests measured
0.97x (globs naming folders) to 3.6x (globs matching every path) ``git ls-tree -r`` listing
the whole tree in C, 25 ms and 93 ms (``benchmarks/bench_inputs.py``, 2026-12-02; about half
what pygit2's entry objects cost).

**Folders covered whole are one line each.** When every glob of a step names a folder
(``docs``) or ends in ``/**`` or ``/*`` after a head that only folders starting with its
literal prefix match whole (``src/**``, ``pkg/*``, ``d*/**``; not one holding ``**/``, such
as ``src/**/*``, which also matches the files directly in ``src``), and below those folders every
tree is as git writes them and holds no symlink, submodule or ``.``/``..`` name, the digest
takes each folder's tree id (a ``40000 folder tree-id`` line: it names every file below, its
mode and content, and every ``.gitattributes`` among them) and the ``.gitattributes`` files
above them, instead of a line per file: reading and matching 50,000 paths cost a no-op ``git
audit run`` about 0.2 s, checking the trees for links costs a read of each (about 25 ms,
``benchmarks/bench_incremental.py``, 2026-12-05). Any other glob, or a link found there, and
the files are listed one by one, as below. Either way the digest changes exactly when a
covered file changes (``tests/plan/test_inputs.py``).

**Symlinks are followed inside the tree.** A check reads what a link points to, so a covered
symlink also covers its target, resolved within the judged tree as the operating system would
(relative to the link's folder, through intermediate links, at most :data:`MAX_LINK_HOPS` links
per path): a link to a file covers that file, a link to a folder every file below it (and what
the links there lead to), and every link passed on the way is covered too. A glob that matches a
path *through* a linked folder (``vendor/lib.py`` where ``vendor`` is a link) covers the file it
reaches. A link whose target does not exist in the tree, or loops, is covered by its own text
only. A link whose target is absolute or leaves the tree makes the step depend on the whole
tree: the checks run in a checkout at ``<slot>/tree``, so such a link can lead back into the
judged tree (``../tree/lib.py`` from the root) by a way the tree does not show
(docs/plan-format.md). When following links would visit more than
:data:`MAX_VISITS` entries, the step depends on the whole tree instead. Without symlinks the
digest is what it always was.

**Inputs that reach a submodule depend on the whole tree.** A submodule is one entry of the
tree (its commit); whether a checkout holds its files at all depends on ``.gitmodules``, and
where the links among its files lead (out of it, back into this tree) is not in this tree. So a
step whose globs match a submodule or could match a path inside one, or whose links lead to one
or through one, depends on the whole tree, as a step without ``inputs`` does.

**How git writes the files counts too.** A ``.gitattributes`` file changes the bytes git checks
out for the paths below its folder (line endings, ``working-tree-encoding``, a declared content
filter) without changing their blobs, so every ``.gitattributes`` in the folder of a covered file
or above it (the root's included) is covered as well, whether the globs match it or not. A tree
without such files has the digest it always had.
"""

from __future__ import annotations

import bisect
import contextlib
import fnmatch
import hashlib
import json
import os
import posixpath
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache

import pygit2

from gitaudit import raw_trees
from gitaudit.errors import RepositoryError
from gitaudit.plan.digest import step_digest
from gitaudit.plan.graph import topological_order
from gitaudit.plan.model import Plan, StepId


def _normalise_path(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _normalise_pattern(pattern: str) -> str:
    """*pattern* normalised as a path; one naming the root itself (``.``, ``./``, ``a/..``),
    which names everything below it as any folder does, as ``**``: as written, it matched no
    path at all, so the digest of a step declaring it never changed."""
    normal = _normalise_path(pattern)
    return "**" if normal in (".", "") else normal


@lru_cache(maxsize=1024)
def _input_regex(pattern: str) -> re.Pattern[str]:
    parts = pattern.split("**/")
    if len(parts) == 1:
        return re.compile(fnmatch.translate(pattern))
    # translate each piece separately and let every "**/" match zero or more directories
    pieces = [_fnmatch_body(p) for p in parts]
    return re.compile("(?s:" + "(?:.*/)?".join(pieces) + r")\Z")


def _fnmatch_body(piece: str) -> str:
    translated = fnmatch.translate(piece)
    assert translated.startswith("(?s:") and translated.endswith(r")\Z")
    return translated[4:-3]


@lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Callable[[str], object]:
    """:func:`matches_input` for *pattern*, taking a normalised path (the answer is truthy or
    not: a pattern with wildcards is its regex's ``match``, which :func:`filter` calls in C)."""
    pattern = _normalise_pattern(pattern)
    regex = _input_regex(pattern).match
    if not any(ch in pattern for ch in "*?["):
        below = pattern.rstrip("/") + "/"
        return lambda path: path.startswith(below) or regex(path) is not None
    return regex


def matches_input(pattern: str, path: str) -> bool:
    """Whether *path* matches an ``inputs`` *pattern* (both POSIX, relative to the root; a leading
    ``./`` is ignored). Matching is :func:`fnmatch.fnmatchcase` (``*`` and ``?`` also match
    ``/``); ``**/`` matches any depth including none (``src/**/x.py`` matches ``src/x.py``); a
    pattern without wildcards also names everything below it (``docs`` matches ``docs/a.md``).
    """
    pattern, path = _normalise_pattern(pattern), _normalise_path(path)
    if not any(ch in pattern for ch in "*?[") and path.startswith(pattern.rstrip("/") + "/"):
        return True
    return _input_regex(pattern).match(path) is not None


def tree_files(repo: pygit2.Repository, tree_id: str) -> list[tuple[str, int, str]]:
    """(path, filemode, object id) of every non-tree entry in a tree, recursively."""
    out: list[tuple[str, int, str]] = []
    todo: list[tuple[str, pygit2.Tree]] = []
    root = repo[pygit2.Oid(hex=tree_id)]
    assert isinstance(root, pygit2.Tree)
    todo.append(("", root))
    while todo:
        prefix, tree = todo.pop()
        for entry in tree:
            path = f"{prefix}{entry.name}"
            if entry.type_str == "tree":
                sub = repo[entry.id]
                assert isinstance(sub, pygit2.Tree)
                todo.append((f"{path}/", sub))
            else:
                out.append((path, int(entry.filemode), str(entry.id)))
    return out


LINK = 0o120000
_TREE = 2  # pygit2's object type of a tree entry that is a folder
_ODD_NAMES = frozenset(("", ".", ".."))  # names git itself refuses; they make paths non-normal
GITLINK = 0o160000
MAX_LINK_HOPS = 40  # symlinks followed to resolve one path (Linux's MAXSYMLINKS)
MAX_LINK_DEPTH = 8  # linked folders entered one inside another to match a glob through them
MAX_VISITS = 200_000  # entries looked at while following links, per step


_FS_ENCODING = sys.getfilesystemencoding()  # how pygit2 decodes a tree entry's name
_FOLDER = raw_trees.FOLDER
_MODES = {b"100644": 0o100644, b"100755": 0o100755, b"120000": LINK, b"160000": GITLINK}
_OBJ_TREE = 2  # the object type of a tree in the object database
_ATTRIBUTES_ENTRY = b" .gitattributes\0"  # in a raw tree: an entry of that name (or bytes alike)


def _raw_entries(kind: int, data: bytes, size: int) -> list[tuple[bytes, bytes, bytes]] | None:
    """(mode, name, raw object id) of every entry of a raw tree object, read in C: several
    times faster than pygit2's entry objects on large trees. None when the object is not a
    tree exactly as git writes them (a mode git would not write, such as a zero-padded one;
    a name with a ``/``; bytes left over): pygit2 reads those, so the two readings never
    differ."""
    if kind != _OBJ_TREE:
        return None
    entry, whole = raw_trees.patterns(size)
    if whole.fullmatch(data) is None:
        return None
    return entry.findall(data)


class _TooMany(Exception):
    """Following links would take too long: the step depends on the whole tree."""


class _Nowhere(Exception):
    """A link leads outside the tree, nowhere, or round in circles."""


class _Outside(Exception):
    """A link leads out of the tree (an absolute target, or ``..`` above the root). What is
    there is no evidence, but the checks run in a checkout that is out there too (at
    ``<slot>/tree``: ``../tree/...`` from the root, or its absolute path, lead back into the
    judged tree), so what the link reaches is not known from the tree: the step depends on the
    whole tree."""


class _Submodule(Exception):
    """The inputs reach a submodule: what its files are, and where the links among them lead
    (back into this tree, say), is not in this tree, and whether a checkout holds them at all
    depends on ``.gitmodules``. The step depends on the whole tree."""


class _Tree:
    """The files of one tree by path, with what its symlinks lead to.

    Read lazily: a folder's files are listed the first time a glob or a link needs them, so a
    step whose ``inputs`` name one folder reads that folder's subtree, not the whole tree, and
    every listing is shared by all the steps of a plan."""

    def __init__(self, repo: pygit2.Repository, tree_id: str) -> None:
        self.repo = repo
        root = repo[pygit2.Oid(hex=tree_id)]
        assert isinstance(root, pygit2.Tree)
        self.root = root
        self._oid_size = len(root.id.raw)  # 20 bytes (SHA-1), 32 in a SHA-256 repository
        self._entries: dict[str, tuple[int, str] | None] = {}
        self._listed: dict[str, list[str]] = {}  # folder -> every file path below it, sorted
        self._matching: dict[str, list[str]] = {}  # pattern -> the file paths it matches
        self._starting: dict[str, list[str]] = {}  # literal -> the file paths starting with it
        self._links: set[str] = set()  # every symlink listed so far
        self._gitlinks: set[str] = set()  # every submodule listed so far
        self._odd: set[str] = set()  # paths listed with a "", "." or ".." part (not normal)
        self._targets: dict[str, str] = {}
        self._attributes: dict[str, dict[str, tuple[str, int, str]]] = {}  # attributes_of
        self._attributes_seen = False  # a tree read so far may hold a .gitattributes file
        self._plain_trees: set[pygit2.Oid] = set()  # trees found plain (:meth:`_plain`)

    def entry(self, path: str) -> tuple[int, str] | None:
        """(filemode, object id) of the file (blob, symlink or submodule) at *path*; None when
        there is none (a folder, or nothing)."""
        if path not in self._entries:
            if path and self._read_whole(path.rpartition("/")[0]):
                self._entries[path] = None  # its folder's entries are all known: none there
                return None
            try:
                found = self.root[path] if path else None
            except (KeyError, ValueError):
                found = None
            self._entries[path] = (
                None
                if found is None or found.type_str == "tree"
                else (int(found.filemode), str(found.id))
            )
            if found is not None and found.filemode == LINK:
                self._links.add(path)
            elif found is not None and found.filemode == GITLINK:
                self._gitlinks.add(path)
        return self._entries[path]

    def _read_whole(self, folder: str) -> bool:
        """Whether every entry below *folder* has been read (it, or a folder above it, has been
        listed), so a path in it that :attr:`_entries` lacks is not there."""
        listed = self._listed
        while folder not in listed:
            if not folder:
                return False
            folder = folder.rpartition("/")[0]
        return True

    def _subtree(self, folder: str) -> pygit2.Tree | None:
        if not folder:
            return self.root
        try:
            entry = self.root[folder]
        except (KeyError, ValueError):
            return None
        if entry.type_str != "tree":
            return None
        sub = self.repo[entry.id]
        return sub if isinstance(sub, pygit2.Tree) else None

    def _walk_tree(self, prefix: str, tree: pygit2.Tree, out: list[str]) -> None:
        todo: list[tuple[str, pygit2.Oid]] = [(prefix, tree.id)]
        entries, links, odd = self._entries, self._links, self._odd
        read, size, Oid = self.repo.odb.read, self._oid_size, pygit2.Oid
        while todo:
            at, oid = todo.pop()
            kind, data = read(oid)
            raw = _raw_entries(kind, data, size)
            if raw is None:  # not a tree as git writes them: pygit2 reads it, entry by entry
                self._attributes_seen = True  # whatever it holds
                self._walk_entries(at, oid, todo, out)
                continue
            if _ATTRIBUTES_ENTRY in data:
                self._attributes_seen = True
            for mode_text, name_bytes, entry_id in raw:
                name = name_bytes.decode(_FS_ENCODING, "surrogateescape")
                path = at + name
                if name in _ODD_NAMES:
                    odd.add(path)
                if mode_text == _FOLDER:
                    entries[path] = None
                    todo.append((path + "/", Oid(raw=entry_id)))
                else:
                    mode = _MODES[mode_text]
                    entries[path] = (mode, entry_id.hex())
                    out.append(path)
                    if mode == LINK:
                        links.add(path)
                    elif mode == GITLINK:
                        self._gitlinks.add(path)

    def _walk_entries(
        self, at: str, oid: pygit2.Oid, todo: list[tuple[str, pygit2.Oid]], out: list[str]
    ) -> None:
        tree = self.repo[oid]
        assert isinstance(tree, pygit2.Tree)
        for entry in tree:
            name = entry.name or ""
            path = at + name
            if name in _ODD_NAMES:
                self._odd.add(path)
            if entry.type == _TREE:
                self._entries[path] = None
                todo.append((path + "/", entry.id))
            else:
                mode = int(entry.filemode)
                self._entries[path] = (mode, str(entry.id))
                out.append(path)
                if mode == LINK:
                    self._links.add(path)
                elif mode == GITLINK:
                    self._gitlinks.add(path)

    def under(self, folder: str) -> list[str]:
        """Every file path below *folder* ("" is the root), sorted."""
        listed = self._listed.get(folder)
        if listed is not None:
            return listed
        parts = folder.split("/") if folder else []
        for cut in range(len(parts) - 1, -1, -1):  # a listed ancestor already holds them
            above = self._listed.get("/".join(parts[:cut]))
            if above is not None:
                lo = bisect.bisect_left(above, folder + "/")
                hi = bisect.bisect_left(above, folder + "0")  # "0" sorts right after "/"
                listed = above[lo:hi]
                break
        else:
            listed = []
            tree = self._subtree(folder)
            if tree is not None:
                self._walk_tree(f"{folder}/" if folder else "", tree, listed)
                listed.sort()
        self._listed[folder] = listed
        return listed

    def starting_with(self, literal: str) -> list[str]:
        """Every file path that starts with *literal* (a superset of what a glob whose literal
        prefix that is can match), sorted."""
        found = self._starting.get(literal)
        if found is not None:
            return found
        folder, _, stem = literal.rpartition("/")
        if not stem:
            found = self.under(folder)
        else:
            tree = self._subtree(folder)
            base = f"{folder}/" if folder else ""
            found = []
            for entry in tree if tree is not None else ():
                name = entry.name or ""
                if name.startswith(stem):
                    path = base + name
                    if name in _ODD_NAMES:
                        self._odd.add(path)
                    if entry.type_str == "tree":
                        found += self.under(path)
                    else:
                        self._entries[path] = (int(entry.filemode), str(entry.id))
                        found.append(path)
                        if entry.filemode == LINK:
                            self._links.add(path)
                        elif entry.filemode == GITLINK:
                            self._gitlinks.add(path)
            found.sort()
        self._starting[literal] = found
        return found

    def matching(self, pattern: str) -> list[str]:
        """The file paths *pattern* matches (:func:`matches_input`), sorted."""
        if pattern not in self._matching:
            self.match_all([pattern])
        return self._matching[pattern]

    def match_all(self, patterns: Iterable[str]) -> None:
        """Work out which paths each of *patterns* matches, in one pass per literal prefix: a
        path is tried only against the patterns whose literal prefix it starts with and whose
        literal suffix (after the last wildcard) it ends with, so many steps' globs over one
        folder, or over the whole tree, cost about one pass over it, not one each."""
        by_prefix: dict[str, list[str]] = {}
        for pattern in dict.fromkeys(patterns):
            if pattern not in self._matching:
                by_prefix.setdefault(_literal(pattern), []).append(pattern)
        for literal, group in by_prefix.items():
            paths = self.starting_with(literal)
            odd = self._odd
            normal = (
                paths
                if not odd or odd.isdisjoint(paths)
                else [_normalise_path(p) if p in odd else p for p in paths]
            )
            self._matching.update(_match_group(group, paths, normal))

    def whole_folders(self, patterns: Iterable[str]) -> list[tuple[str, str]] | None:
        """(folder, tree id) of the folders *patterns* cover whole, sorted, when that is all
        they cover and nothing in them needs following: each pattern names a folder (``docs``)
        or ends in ``/**`` or ``/*`` after a head that only folders starting with its literal
        prefix match whole (``src/**``, ``d*/**``: ``*`` matches ``/`` too, so a path is covered
        exactly when a folder above it matches the head), and below those folders every tree
        is as git writes them and holds no symlink, submodule or odd name. None otherwise (the
        files are listed one by one: :func:`_covered`). A folder inside another is left out."""
        found: dict[str, str] = {}
        for pattern in patterns:
            folders = self._whole(_normalise_pattern(pattern))
            if folders is None:
                return None
            found.update(folders)
        out: list[tuple[str, str]] = []
        for folder in sorted(found):  # a folder sorts before the folders inside it
            if out and _inside(folder, out[-1][0]):
                continue
            out.append((folder, found[folder]))
        if not all(self._plain(pygit2.Oid(hex=oid)) for _folder, oid in out):
            return None
        return out

    def _whole(self, normal: str) -> dict[str, str] | None:
        """The folders the normalised pattern *normal* covers whole, by path (tree ids), when
        it covers nothing else (:meth:`whole_folders`); None when it may."""
        if normal in ("**", "*"):
            return {"": str(self.root.id)}
        if not any(ch in normal for ch in "*?["):  # a name: the folder and all below it
            tree = self._subtree(normal)
            return {normal: str(tree.id)} if tree is not None else None
        head = _folders_head(normal)
        return self._matching_folders(head) if head is not None else None

    def _matching_folders(self, head: str) -> dict[str, str] | None:
        """The folders *head* matches whole beside its literal prefix (tree ids), when no
        path there can match it otherwise: no link or submodule there (a path through it may
        match) and no folder it does not match (one deeper in it may)."""
        folder, _, stem = _literal(head).rpartition("/")
        tree = self._subtree(folder)
        if tree is None:  # not a folder of the tree (a link on the way, say)
            return None
        whole = _input_regex(head).match
        base = f"{folder}/" if folder else ""
        found: dict[str, str] = {}
        for entry in tree:
            name = entry.name or ""
            if name in _ODD_NAMES or (
                name.startswith(stem)
                and (
                    entry.filemode in (LINK, GITLINK)
                    or (entry.type_str == "tree" and whole(base + name) is None)
                )
            ):
                return None
            if name.startswith(stem) and entry.type_str == "tree":
                found[base + name] = str(entry.id)
        return found  # a file beside them has no folder above it the head could match

    def _plain(self, top: pygit2.Oid) -> bool:
        """Whether every tree from *top* down is as git writes them and holds only files,
        executable files and folders with normal names (remembered per tree)."""
        plain, read, size = raw_trees.plain(self._oid_size), self.repo.odb.read, self._oid_size
        todo = [top]
        while todo:
            oid = todo.pop()
            if oid in self._plain_trees:
                continue
            kind, data = read(oid)
            if kind != _OBJ_TREE or plain.fullmatch(data) is None:
                return False
            if _FOLDER + b" " in data:  # the body matched `plain`: its entries line up
                entries = raw_trees.patterns(size)[0].findall(data)
                todo += [pygit2.Oid(raw=raw) for mode, _name, raw in entries if mode == _FOLDER]
            self._plain_trees.add(oid)
        return True

    def links_for(self, patterns: Iterable[str]) -> list[str]:
        """The symlinks :func:`_could_match_below` can hold for: those whose path starts with a
        pattern's literal prefix, and those on the way to it (a prefix of it ending at a
        ``/``); sorted."""
        links: set[str] = set()
        for pattern in patterns:
            literal = _literal(pattern)
            self.starting_with(literal)  # lists them, and every link among them
            links.update(link for link in self._links if link.startswith(literal))
            for at, ch in enumerate(literal):
                if ch == "/" and self.mode(literal[:at]) == LINK:
                    links.add(literal[:at])
        return sorted(links)

    def reaches_a_submodule(self, patterns: Iterable[str]) -> bool:
        """Whether a pattern could match a submodule or a path inside one: a submodule whose
        path starts with the pattern's literal prefix, or one on the way to it (a prefix of it
        ending at a ``/``)."""
        for pattern in patterns:
            literal = _literal(pattern)
            self.starting_with(literal)  # lists them, and every submodule among them
            if any(gitlink.startswith(literal) for gitlink in self._gitlinks):
                return True
            for at, ch in enumerate(literal):
                if ch == "/" and self.mode(literal[:at]) == GITLINK:
                    return True
        return False

    def no_submodules_among(self, paths: Iterable[str]) -> bool:
        """Whether none of *paths* (listed ones) is a submodule."""
        return not self._gitlinks or self._gitlinks.isdisjoint(paths)

    def without_attributes(self) -> bool:
        """Whether the whole tree has been read and holds no ``.gitattributes`` file."""
        return "" in self._listed and not self._attributes_seen

    def attributes_of(self, folder: str) -> dict[str, tuple[str, int, str]]:
        """The ``.gitattributes`` files of *folder* and of every folder above it, by folder:
        (path, filemode, object id). Worked out once per folder, for all the steps."""
        missing = []
        while folder not in self._attributes:
            missing.append(folder)
            if not folder:
                break
            folder = folder.rpartition("/")[0]
        for folder in reversed(missing):  # from the top down: each folder extends its parent's
            above = self._attributes[folder.rpartition("/")[0]] if folder else {}
            path = f"{folder}/{ATTRIBUTES}" if folder else ATTRIBUTES
            entry = self.entry(path)
            self._attributes[folder] = {**above, folder: (path, *entry)} if entry else above
        return self._attributes[missing[0] if missing else folder]

    def listed_entries(self) -> dict[str, tuple[int, str] | None]:
        """(filemode, object id) of every path looked at so far, None for none there."""
        return self._entries

    def no_links_among(self, paths: list[str]) -> bool:
        """Whether none of *paths* (listed ones) is a symlink."""
        return not self._links or self._links.isdisjoint(paths)

    def mode(self, path: str) -> int | None:
        entry = self.entry(path)
        return entry[0] if entry is not None else None

    def is_folder(self, path: str) -> bool:
        return not path or bool(self.under(path))

    def target(self, link: str) -> str:
        if link not in self._targets:
            entry = self.entry(link)
            assert entry is not None
            blob = self.repo[pygit2.Oid(hex=entry[1])]
            assert isinstance(blob, pygit2.Blob)
            self._targets[link] = blob.data.decode("utf-8", "surrogateescape")
        return self._targets[link]

    def resolve(self, link: str) -> tuple[str, str, list[str]]:
        """Where the symlink *link* leads in the tree: ``("file", path)`` (a file, or a
        submodule), ``("folder", path)`` ("" is the root), or ``("none", "")`` (dangling or
        looping); with the links passed on the way (*link* included). Raises :class:`_Outside`
        when it leads out of the tree."""
        passed: list[str] = []
        try:
            kind, path = self._walk(link, passed)
        except _Nowhere:
            return "none", "", passed
        return kind, path, passed

    def _walk(self, link: str, passed: list[str]) -> tuple[str, str]:
        where = link.split("/")[:-1]  # a link's target is relative to its folder
        todo = self._follow(link, passed)
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if not where:
                    raise _Outside  # above the root
                where.pop()
                continue
            path = "/".join([*where, part])
            entry = self.entry(path)
            if entry is None:
                if not self.is_folder(path):
                    if ".." in todo:
                        # `out/../real.txt` with no `out` in the tree: while the checks run, a
                        # folder made there (a build's, a cache's) leads on to real.txt, which
                        # the digest would not cover; the whole tree counts, as for a link out
                        raise _Outside
                    raise _Nowhere  # dangling
                where.append(part)
            elif entry[0] == LINK:
                todo = self._follow(path, passed) + todo
            else:  # a file, or a submodule (its recorded commit covers what is below it)
                if entry[0] != GITLINK and any(p not in ("", ".") for p in todo):
                    raise _Nowhere  # a file is no folder
                return "file", path
        return "folder", "/".join(where)

    def _follow(self, link: str, passed: list[str]) -> list[str]:
        if len(passed) >= MAX_LINK_HOPS:
            raise _Nowhere  # a loop, or as good as one
        passed.append(link)
        text = self.target(link)
        if text.startswith("/"):
            raise _Outside  # absolute
        return text.split("/")


def _match_group(group: list[str], paths: list[str], normal: list[str]) -> dict[str, list[str]]:
    """The *paths* (sorted; *normal* is each one normalised) each pattern of *group* matches."""
    found: dict[str, list[str]] = {}
    by_suffix: dict[int, dict[str, list[str]]] = {}
    for pattern in group:
        suffix = _suffix(pattern)
        if suffix:
            by_suffix.setdefault(len(suffix), {}).setdefault(suffix, []).append(pattern)
            found[pattern] = []
            continue
        match = _matcher(pattern)  # no literal suffix: every path is a candidate, in one C pass
        found[pattern] = (
            list(filter(match, paths))
            if normal is paths
            else [p for p, n in zip(paths, normal, strict=True) if match(n)]
        )
    # only the paths that end in a pattern's literal suffix are tried (picked out in one pass
    # per suffix length; each pattern has one suffix, so its paths stay in order)
    for length, table in sorted(by_suffix.items()):
        matchers = {p: _matcher(p) for patterns in table.values() for p in patterns}
        for at in [at for at, path in enumerate(paths) if path[-length:] in table]:
            path = paths[at]
            for pattern in table[path[-length:]]:
                if matchers[pattern](normal[at]):
                    found[pattern].append(path)
    return found


def _folders_head(normal: str) -> str | None:
    """The head of a normalised pattern ending in ``/**`` or ``/*`` (``d*`` of ``d*/**``): a
    path matches the pattern exactly when a folder above it matches the head (``*`` matches
    ``/``). None for any other pattern, or one holding ``**/`` anywhere, the head's end and
    the tail's ``/`` included (it may match no folder: ``src/**/*`` also matches
    ``src/impl.txt``, which no folder of ``src`` holds)."""
    for tail in ("/**", "/*"):
        if normal.endswith(tail):
            head = normal[: -len(tail)]
            ok = head and "**/" not in normal and not head.endswith("/")
            return head if ok else None
    return None


def _literal(pattern: str) -> str:
    """The part of a (normalised) pattern before its first wildcard: every path it matches
    starts with it."""
    return re.split(r"[*?\[]", _normalise_pattern(pattern), maxsplit=1)[0]


def _suffix(pattern: str) -> str:
    """The literal end of a pattern with wildcards (every path it matches ends with it); "" for
    a pattern without wildcards (it also names everything below it) or one ending in one."""
    normal = _normalise_pattern(pattern)
    if not any(ch in normal for ch in "*?["):
        return ""
    last = normal.split("**/")[-1]  # "**/" may match nothing at all: the "/" before it too
    return re.split(r"[*?\[\]]", last)[-1]


def _could_match_below(patterns: Iterable[str], path: str) -> bool:
    """Whether some pattern might match a path below *path* (its literal prefix allows it)."""
    below = path + "/"
    for pattern in patterns:
        literal = _literal(pattern)
        if literal.startswith(below) or below.startswith(literal):
            return True
    return False


def _inside(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder + "/")


class _Cover:
    """The files a step's ``inputs`` cover in one tree, links followed (module docstring)."""

    def __init__(self, tree: _Tree, patterns: tuple[str, ...]) -> None:
        self.tree = tree
        self.patterns = patterns
        self.visits = 0

    def matches(self, path: str) -> bool:
        return any(matches_input(p, path) for p in self.patterns)

    def visit(self, count: int) -> None:
        self.visits += count
        if self.visits > MAX_VISITS:
            raise _TooMany

    def paths(self) -> list[str]:
        tree = self.tree
        lists = [tree.matching(pattern) for pattern in self.patterns]
        follow = list(lists[0]) if len(lists) == 1 else sorted(set().union(*lists))
        matched = len(follow)  # sorted, each path once
        if tree.reaches_a_submodule(self.patterns):
            raise _Submodule
        passed: list[str] = []
        for link in tree.links_for(self.patterns):
            if not self.matches(link) and _could_match_below(self.patterns, link):
                self.through(link, link, 0, [link.rpartition("/")[0]], follow, passed)
        if not passed and len(follow) == matched and tree.no_links_among(follow):
            self.visit(matched)  # nothing to follow: what matched is what is covered
            return follow
        covered = self.closure(follow, passed)
        if not tree.no_submodules_among(covered):  # a link leads to one, or through one
            raise _Submodule
        return sorted(covered)

    def through(
        self,
        link: str,
        shown: str,
        depth: int,
        folders: list[str],
        follow: list[str],
        passed: list[str],
    ) -> None:
        """Add to *follow* the files whose path through the linked folder *link* (seen at
        *shown*) a pattern matches, or the link itself where following stops (a loop, or deep
        enough: it is covered whole); to *passed* the links the matched paths go through."""
        kind, target, on_the_way = self.tree.resolve(link)
        if kind == "file" and self.tree.mode(target) == GITLINK:
            raise _Submodule  # the glob reaches inside the submodule the link leads to
        if kind != "folder":
            return
        if depth >= MAX_LINK_DEPTH or any(_inside(f, target) for f in folders):
            follow.append(link)
            return
        found = len(follow)
        below = self.tree.under(target)
        self.visit(len(below))
        for real in below:
            seen = f"{shown}/{real[len(target) + 1 :] if target else real}"
            if self.matches(seen):
                follow.append(real)
            elif self.tree.mode(real) == LINK and _could_match_below(self.patterns, seen):
                self.through(real, seen, depth + 1, [*folders, target], follow, passed)
            elif self.tree.mode(real) == GITLINK and _could_match_below(self.patterns, seen):
                raise _Submodule
        if len(follow) > found:
            passed += on_the_way

    def closure(self, follow: list[str], passed: list[str]) -> set[str]:
        """*follow*, *passed* and everything the links in *follow* lead to, transitively (the
        links passed on the way count by their own text)."""
        if self.tree.no_links_among(follow):  # nothing to follow: the same, counted at once
            distinct = set(follow)
            self.visit(len(distinct))
            return distinct.union(passed)
        covered = set(passed)
        followed: set[str] = set()
        folders: set[str] = set()
        todo = list(follow)
        while todo:
            path = todo.pop()
            if path in followed:
                continue
            followed.add(path)
            covered.add(path)
            self.visit(1)
            if self.tree.mode(path) != LINK:
                continue
            kind, target, on_the_way = self.tree.resolve(path)
            covered.update(on_the_way)
            if kind == "file":
                todo.append(target)
            elif kind == "folder" and target not in folders:
                folders.add(target)
                todo += self.tree.under(target)
        return covered


def covered_files(
    repo: pygit2.Repository, tree_id: str, patterns: Iterable[str]
) -> list[tuple[str, int, str]] | None:
    """(path, filemode, object id) of the files of the tree that *patterns* cover, symlinks
    followed (the module docstring); None when that is too costly to work out, or when they
    reach a submodule or a link out of the tree (then the whole tree counts)."""
    return _covered(_Tree(repo, tree_id), tuple(patterns))


def _covered(tree: _Tree, patterns: tuple[str, ...]) -> list[tuple[str, int, str]] | None:
    try:
        paths = _Cover(tree, patterns).paths()
    except (_TooMany, _Submodule, _Outside):
        return None
    found = list(map(tree.listed_entries().get, paths))  # in one C pass: nearly all listed
    out = []
    for path, listed in zip(paths, found, strict=True):
        entry = listed or tree.entry(path)
        assert entry is not None
        out.append((path, *entry))
    return out


ATTRIBUTES = ".gitattributes"


def _attributes_over(
    tree: _Tree, covered: list[tuple[str, int, str]]
) -> list[tuple[str, int, str]]:
    """The ``.gitattributes`` files of the folders *covered* files are in, and of every folder
    above them, that *covered* does not hold already: (path, filemode, object id), sorted."""
    if tree.without_attributes():
        return []
    chosen: dict[str, tuple[str, int, str]] = {}  # by folder
    for folder in {path.rpartition("/")[0] for path, _mode, _oid in covered}:
        chosen.update(tree.attributes_of(folder))
    if not chosen:
        return []
    have = {path for path, _mode, _oid in covered}
    found = (chosen[folder] for folder in sorted(chosen))  # the order of their folders
    return [entry for entry in found if entry[0] not in have]


def _folder_lines(tree: _Tree, folders: list[tuple[str, str]]) -> bytes:
    """The digest's lines for inputs that cover *folders* whole (:meth:`_Tree.whole_folders`):
    each folder's tree id, which names every file below it, their modes and what any
    ``.gitattributes`` among them says, as a ``40000`` line (no covered file has that mode, so
    these lines never read as files'), then the ``.gitattributes`` files above them."""
    above: dict[str, tuple[str, int, str]] = {}  # by folder
    for folder, _oid in folders:
        if folder:
            above.update(tree.attributes_of(folder.rpartition("/")[0]))
    entries = [(folder, _TREE_MODE, oid) for folder, oid in folders]
    return _lines([*entries, *(above[folder] for folder in sorted(above))])


_TREE_MODE = 0o40000


def _written(path: str) -> str:
    """*path* as a covered file's line of the digest writes it: as is, unless it could read as
    something else. git allows a line break in a file name, and a name such as ``a <blob>\\n100644
    b`` would read as the lines of two files of another tree; a name of bytes that are not UTF-8
    (surrogates here) cannot be written as is. Those, and a path starting with a double quote,
    are written JSON-quoted, which no path written as is looks like, so every set of lines
    reads one way only; every other path is written as it always was."""
    if "\n" in path or path.startswith('"') or not (path.isascii() or _utf8(path)):
        return json.dumps(path)
    return path


def _lines(entries: list[tuple[str, int, str]]) -> bytes:
    """The covered files' lines of the digest, each path :func:`_written`. Joined as they are
    first (one C pass each to tell): when the text holds one line break per entry, no ``"``
    after a space and encodes as UTF-8, no path needed quoting, and that is the text."""
    octal = _OCTAL
    text = "".join([f"\n{octal[mode]} {path} {oid}" for path, mode, oid in entries])
    if text.count("\n") == len(entries) and ' "' not in text:
        with contextlib.suppress(UnicodeEncodeError):
            return text.encode()
    return "".join(f"\n{mode:o} {_written(path)} {oid}" for path, mode, oid in entries).encode()


class _Octal(dict[int, str]):
    """A file mode as the digest writes it (octal), each worked out once: formatting it for
    each of 50,000 lines cost about as much as the rest of the line."""

    def __missing__(self, mode: int) -> str:
        text = self[mode] = f"{mode:o}"
        return text


_OCTAL = _Octal()


def _utf8(path: str) -> bool:
    try:
        path.encode()
    except UnicodeEncodeError:
        return False
    return True


_DIGESTS: dict[tuple[object, ...], dict[StepId, str]] = {}  # the last few, by what they depend on
_DIGESTS_KEPT = 8


def input_digests(repo: pygit2.Repository, plan: Plan, tree_id: str) -> dict[StepId, str]:
    """Every step's input digest for the tree *tree_id* (the module docstring). Remembered in this
    process for the last few (repository, tree, steps' contracts, inputs and dependencies): a
    tree id names its content forever, so ``run`` and the gate judging the same tree right after
    share one reading of it."""
    where = getattr(repo, "path", None)
    contracts = {s.id: step_digest(plan, s) for s in plan.steps}  # once each: RFC 8785 is slow
    key = (
        os.path.realpath(where) if where else id(repo),
        tree_id,
        (MAX_VISITS, MAX_LINK_DEPTH, MAX_LINK_HOPS),
        tuple(
            (s.id, contracts[s.id], tuple(s.inputs), tuple(sorted(s.dependency_ids())))
            for s in plan.steps
        ),
    )
    found = _DIGESTS.get(key)
    if found is None:
        try:
            found = _input_digests(repo, plan, tree_id, contracts)
        except pygit2.GitError as exc:  # libgit2 hashes each object it reads: a forged one
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RepositoryError(
                f"cannot read tree {tree_id[:12]} to work out the steps' input digests: {why}",
                hint="an object in .git/objects does not hold what its name says: `git fsck` "
                "names it; remove it and run again",
            ) from exc
        if len(_DIGESTS) >= _DIGESTS_KEPT:
            del _DIGESTS[next(iter(_DIGESTS))]
        _DIGESTS[key] = found
    return dict(found)


def _input_digests(
    repo: pygit2.Repository, plan: Plan, tree_id: str, contracts: Mapping[StepId, str]
) -> dict[StepId, str]:
    digests: dict[StepId, str] = {}
    lines: dict[tuple[str, ...], bytes] = {}  # the covered files' lines, by the steps' inputs
    declared = dict.fromkeys(tuple(step.inputs) for step in plan.steps if step.inputs)
    tree = _Tree(repo, tree_id) if declared else None
    if tree is not None:
        for patterns in declared:  # folders covered whole: one line each, no walk
            folders = tree.whole_folders(patterns)
            if folders is not None:
                lines[patterns] = _folder_lines(tree, folders)
        tree.match_all(p for patterns in declared if patterns not in lines for p in patterns)
    for sid in topological_order(plan):
        step = plan.step(sid)
        assert step is not None
        h = hashlib.sha256()
        h.update(contracts[sid].encode())
        if step.inputs:
            patterns = tuple(step.inputs)
            if patterns not in lines:
                assert tree is not None
                covered = _covered(tree, patterns)
                lines[patterns] = (
                    f"\ntree {tree_id}".encode()
                    if covered is None
                    else _lines([*covered, *_attributes_over(tree, covered)])
                )
            h.update(lines[patterns])
        else:
            h.update(f"\ntree {tree_id}".encode())
        for dep in sorted(step.dependency_ids()):
            h.update(f"\ndep {dep} {digests.get(dep, '?')}".encode())
        digests[sid] = "sha256:" + h.hexdigest()
    return digests
