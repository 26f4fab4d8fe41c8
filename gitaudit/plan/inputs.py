"""Input digests: what a step's evidence depends on, so unchanged evidence can be carried.

A step's input digest is sha256 over: its step-contract digest (so a reseal that changes the step
reopens it, and one that does not keeps it: versioned proofs); the ``mode path blob`` lines of the
workspace files matching its ``inputs`` globs — or the whole tree id when it declares none (it
depends on everything); and the input digests of every step it depends on (so a changed
dependency reopens its dependants). Two runs with the same input digest for a step would run the
same checks against the same bytes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
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


def input_digests(repo: pygit2.Repository, plan: Plan, tree_id: str) -> dict[StepId, str]:
    files: list[tuple[str, int, str]] | None = None
    digests: dict[StepId, str] = {}
    for sid in topological_order(plan):
        step = plan.step(sid)
        assert step is not None
        h = hashlib.sha256()
        h.update(step_digest(plan, step).encode())
        if step.inputs:
            if files is None:
                files = sorted(tree_files(repo, tree_id))
            for path, mode, oid in files:
                if any(matches_input(p, path) for p in step.inputs):
                    h.update(f"\n{mode:o} {path} {oid}".encode())
        else:
            h.update(f"\ntree {tree_id}".encode())
        for dep in sorted(step.dependency_ids()):
            h.update(f"\ndep {dep} {digests.get(dep, '?')}".encode())
        digests[sid] = "sha256:" + h.hexdigest()
    return digests
