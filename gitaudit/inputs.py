"""Input digests: what a step's evidence depends on, so unchanged evidence can be carried.

A step's input digest is sha256 over: its step-contract digest (so a reseal that changes the step
reopens it, and one that does not keeps it: versioned proofs); the ``mode path blob`` lines of the
workspace files matching its ``inputs`` globs — or the whole tree id when it declares none (it
depends on everything); and the input digests of every step it depends on (so a changed
dependency reopens its dependants). Two runs with the same input digest for a step would run the
same checks against the same bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import cache

import pygit2

from gitaudit.plan.digest import step_digest
from gitaudit.plan.graph import topological_order
from gitaudit.plan.model import Plan, StepId


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    """Glob -> regex: ``**`` spans folders, ``*`` and ``?`` stay inside one; a plain folder name
    matches everything below it."""
    pattern = pattern.strip("/")
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(f"{out}(?:/.*)?")


def matches(pattern: str, path: str) -> bool:
    return _compile(pattern).fullmatch(path) is not None


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
                if any(matches(p, path) for p in step.inputs):
                    h.update(f"\n{mode:o} {path} {oid}".encode())
        else:
            h.update(f"\ntree {tree_id}".encode())
        for dep in sorted(step.dependency_ids()):
            h.update(f"\ndep {dep} {digests.get(dep, '?')}".encode())
        digests[sid] = "sha256:" + h.hexdigest()
    return digests


def steps_touching(plan: Plan, paths: Iterable[str]) -> set[StepId]:
    """Steps whose inputs match any of *paths*, and every step without inputs."""
    changed = list(paths)
    return {
        s.id
        for s in plan.steps
        if not s.inputs or any(matches(p, path) for p in s.inputs for path in changed)
    }
