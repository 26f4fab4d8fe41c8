"""What a ``workspace: live`` step reads of the work tree, beyond what its fingerprint compares.

A live step runs its checks in the work tree itself, and the run's purity check fingerprints the
work tree again when they are done: a tracked file the steps changed is a changed tree. Two
things escape that comparison, and each let the checks read what the judged tree does not hold:

* **A file written and put back.** A check writes "ok" into a tracked file for the checks after
  it, and a later one (or a process beside the run) puts the tree's bytes back, even with their
  times: the end state is the tree. Every file and link the tree holds (into its checked-out
  submodules) is stamped (inode, change time: :data:`gitaudit.git.index_stat.Stamp`, which no
  process can set back) before the checks start, and compared when they are done
  (:func:`tracked_stamps`), as the private checkout's purity check does.
* **A submodule's own state.** The fingerprint records each submodule's commit, never its files,
  so an edited, staged or added file inside a submodule is the same tree, and so is a
  submodule folder that holds files but no ``.git`` (its gitlink is kept). A checked-out
  submodule (nested ones too) must be exactly its commit, as the fingerprint of its own work
  tree sees it, and one that is not checked out an empty folder, as a clone leaves it
  (:func:`unfaithful_submodules`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gitaudit.errors import RepositoryError
from gitaudit.git import index_stat
from gitaudit.git.call import run_git
from gitaudit.git.fingerprint import workspace_fingerprint

DEPTH = 8  # submodules nested deeper than this are not looked into (as the checkout refuses)
_GITLINK = b"160000"


def _entries(folder: Path, tree: str) -> list[tuple[bytes, str, str]]:
    """(mode, object id, path) of every file, link and gitlink of *tree*, read in the
    repository of *folder*."""
    listed = run_git(["ls-tree", "-r", "-z", "--full-tree", tree], cwd=folder, check=False)
    if listed.code != 0:
        raise RepositoryError(
            f"cannot list the tree {tree} in {folder}: {listed.err.strip()}",
            hint="the tree's objects must be in the repository",
        )
    found = []
    for record in listed.stdout.split(b"\0"):
        info, tab, raw = record.partition(b"\t")
        fields = info.split(b" ")
        if tab and len(fields) == 3:
            found.append((fields[0], fields[2].decode("ascii"), os.fsdecode(raw)))
    return found


def _checked_out(folder: Path) -> bool:
    return os.path.lexists(folder / ".git")


def _holds_anything(folder: Path) -> bool:
    """Whether the folder of a submodule that is not checked out holds anything (the fingerprint
    keeps its gitlink whatever the folder holds); an unreadable one counts as holding."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False  # absent, or not a folder: the fingerprint records what is there instead
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return True


def tracked_stamps(workdir: Path, tree: str) -> dict[str, index_stat.Stamp]:
    """path -> :data:`~gitaudit.git.index_stat.Stamp` of every file and link of *tree* as the
    work tree *workdir* holds it now, and of those of each checked-out submodule's commit
    (``lib/verdict``). Paths absent now are left out: the fingerprint names them."""
    found: dict[str, index_stat.Stamp] = {}

    def walk(folder: Path, tree: str, prefix: str, depth: int) -> None:
        for mode, oid, path in _entries(folder, tree):
            where = folder / path
            if mode == _GITLINK:
                if depth < DEPTH and _checked_out(where):
                    with contextlib.suppress(RepositoryError):  # unfaithful_submodules says why
                        walk(where, oid, f"{prefix}{path}/", depth + 1)
                continue
            try:
                found[prefix + path] = index_stat.stamp_of(os.lstat(where))
            except OSError:
                continue

    walk(workdir, tree, "", 0)
    return found


def unfaithful_submodules(workdir: Path, tree: str) -> list[str]:
    """The submodules of *tree* (nested ones too, by their path from *workdir*) whose work tree
    is not exactly the commit *tree* records for them: another commit checked out, or a file
    changed, staged or added there (what the fingerprint of the submodule's own work tree sees;
    ignored files are the submodule's, like the work tree's own); or, not checked out (no
    ``.git``), a folder that is not empty."""
    found: list[str] = []

    def walk(folder: Path, tree: str, prefix: str, depth: int) -> None:
        for mode, commit, path in _entries(folder, tree):
            where = folder / path
            if mode != _GITLINK:
                continue
            if not _checked_out(where):
                if _holds_anything(where):  # files where a clone leaves an empty folder
                    found.append(prefix + path)
                continue
            try:
                seen = workspace_fingerprint(where)
            except RepositoryError:
                found.append(prefix + path)
                continue
            if seen.head != commit or not seen.clean:
                found.append(prefix + path)
            elif depth + 1 < DEPTH:
                walk(where, seen.tree, f"{prefix}{path}/", depth + 1)

    walk(workdir, tree, "", 0)
    return found
