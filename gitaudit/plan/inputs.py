"""Input digests: what a step's evidence depends on, so unchanged evidence can be carried.

A step's input digest is sha256 over: its step-contract digest (so a reseal that changes the step
reopens it, and one that does not keeps it: versioned proofs); the ``mode path blob`` lines of the
workspace files its ``inputs`` globs cover — or the whole tree id when it declares none (it
depends on everything); and the input digests of every step it depends on (so a changed
dependency reopens its dependants). Two runs with the same input digest for a step would run the
same checks against the same bytes.

**Symlinks are followed inside the tree.** A check reads what a link points to, so a covered
symlink also covers its target, resolved within the judged tree as the operating system would
(relative to the link's folder, through intermediate links, at most :data:`MAX_LINK_HOPS` links
per path): a link to a file covers that file, a link to a folder every file below it (and what
the links there lead to), and every link passed on the way is covered too. A glob that matches a
path *through* a linked folder (``vendor/lib.py`` where ``vendor`` is a link) covers the file it
reaches. A link whose target is absolute, leaves the tree, does not exist in it, or loops is
covered by its own text only: content outside the tree is no more part of the evidence than an
ignored file is (docs/plan-format.md). When following links would visit more than
:data:`MAX_VISITS` entries, the step depends on the whole tree instead. Without symlinks the
digest is what it always was.
"""

from __future__ import annotations

import bisect
import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Iterable
from functools import lru_cache

import pygit2

from gitaudit.plan.digest import step_digest
from gitaudit.plan.graph import topological_order
from gitaudit.plan.model import Plan, StepId


def _normalise_path(path: str) -> str:
    return posixpath.normpath(path) if path else path


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


def matches_input(pattern: str, path: str) -> bool:
    """Whether *path* matches an ``inputs`` *pattern* (both POSIX, relative to the root; a leading
    ``./`` is ignored). Matching is :func:`fnmatch.fnmatchcase` (``*`` and ``?`` also match
    ``/``); ``**/`` matches any depth including none (``src/**/x.py`` matches ``src/x.py``); a
    pattern without wildcards also names everything below it (``docs`` matches ``docs/a.md``).
    """
    pattern, path = _normalise_path(pattern), _normalise_path(path)
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
GITLINK = 0o160000
MAX_LINK_HOPS = 40  # symlinks followed to resolve one path (Linux's MAXSYMLINKS)
MAX_LINK_DEPTH = 8  # linked folders entered one inside another to match a glob through them
MAX_VISITS = 200_000  # entries looked at while following links, per step


class _TooMany(Exception):
    """Following links would take too long: the step depends on the whole tree."""


class _Nowhere(Exception):
    """A link leads outside the tree, nowhere, or round in circles."""


class _Tree:
    """The files of one tree by path, with what its symlinks lead to."""

    def __init__(self, repo: pygit2.Repository, tree_id: str) -> None:
        self.repo = repo
        self.files = sorted(tree_files(repo, tree_id))
        self.paths = [path for path, _, _ in self.files]
        self.entries = {path: (mode, oid) for path, mode, oid in self.files}
        self.links = [path for path, mode, _ in self.files if mode == LINK]
        self._targets: dict[str, str] = {}

    def under(self, folder: str) -> list[str]:
        """Every file path below *folder* ("" is the root), sorted."""
        if not folder:
            return self.paths
        lo = bisect.bisect_left(self.paths, folder + "/")
        hi = bisect.bisect_left(self.paths, folder + "0")  # "0" sorts right after "/"
        return self.paths[lo:hi]

    def is_folder(self, path: str) -> bool:
        return not path or bool(self.under(path))

    def target(self, link: str) -> str:
        if link not in self._targets:
            blob = self.repo[pygit2.Oid(hex=self.entries[link][1])]
            assert isinstance(blob, pygit2.Blob)
            self._targets[link] = blob.data.decode("utf-8", "surrogateescape")
        return self._targets[link]

    def resolve(self, link: str) -> tuple[str, str, list[str]]:
        """Where the symlink *link* leads in the tree: ``("file", path)`` (a file, or a
        submodule), ``("folder", path)`` ("" is the root), or ``("none", "")`` (outside the
        tree, dangling or looping); with the links passed on the way (*link* included)."""
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
                    raise _Nowhere  # above the root
                where.pop()
                continue
            path = "/".join([*where, part])
            entry = self.entries.get(path)
            if entry is None:
                if not self.is_folder(path):
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
            raise _Nowhere  # absolute: outside the tree
        return text.split("/")


def _could_match_below(patterns: Iterable[str], path: str) -> bool:
    """Whether some pattern might match a path below *path* (its literal prefix allows it)."""
    below = path + "/"
    for pattern in patterns:
        literal = re.split(r"[*?\[]", _normalise_path(pattern), maxsplit=1)[0]
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
        follow = [p for p in tree.paths if self.matches(p)]
        passed: list[str] = []
        for link in tree.links:
            if not self.matches(link) and _could_match_below(self.patterns, link):
                self.through(link, link, 0, [link.rpartition("/")[0]], follow, passed)
        return sorted(self.closure(follow, passed))

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
            elif self.tree.entries[real][0] == LINK and _could_match_below(self.patterns, seen):
                self.through(real, seen, depth + 1, [*folders, target], follow, passed)
        if len(follow) > found:
            passed += on_the_way

    def closure(self, follow: list[str], passed: list[str]) -> set[str]:
        """*follow*, *passed* and everything the links in *follow* lead to, transitively (the
        links passed on the way count by their own text)."""
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
            if self.tree.entries[path][0] != LINK:
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
    followed (the module docstring); None when that is too costly to work out (then the whole
    tree counts)."""
    return _covered(_Tree(repo, tree_id), tuple(patterns))


def _covered(tree: _Tree, patterns: tuple[str, ...]) -> list[tuple[str, int, str]] | None:
    try:
        paths = _Cover(tree, patterns).paths()
    except _TooMany:
        return None
    return [(p, *tree.entries[p]) for p in paths]


def input_digests(repo: pygit2.Repository, plan: Plan, tree_id: str) -> dict[StepId, str]:
    tree: _Tree | None = None
    digests: dict[StepId, str] = {}
    for sid in topological_order(plan):
        step = plan.step(sid)
        assert step is not None
        h = hashlib.sha256()
        h.update(step_digest(plan, step).encode())
        if step.inputs:
            if tree is None:
                tree = _Tree(repo, tree_id)
            covered = _covered(tree, tuple(step.inputs))
            if covered is None:
                h.update(f"\ntree {tree_id}".encode())
            for path, mode, oid in covered or ():
                h.update(f"\n{mode:o} {path} {oid}".encode())
        else:
            h.update(f"\ntree {tree_id}".encode())
        for dep in sorted(step.dependency_ids()):
            h.update(f"\ndep {dep} {digests.get(dep, '?')}".encode())
        digests[sid] = "sha256:" + h.hexdigest()
    return digests
