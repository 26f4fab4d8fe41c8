"""What a ``workspace: live`` step reads of the work tree, beyond what its fingerprint compares.

A live step runs its checks in the work tree itself, and the run's purity check fingerprints the
work tree again when they are done: a tracked file the steps changed is a changed tree. What
escapes that comparison let the checks read what the judged tree does not hold:

* **A file written and put back.** A check writes "ok" into a tracked file for the checks after
  it, and a later one (or a process beside the run) puts the tree's bytes back, even with their
  times: the end state is the tree. Every file and link the tree holds (into its checked-out
  submodules) is stamped (inode, change time: :data:`gitaudit.git.index_stat.Stamp`, which no
  process can set back) before the checks start, and compared when they are done
  (:func:`tracked_stamps`), as the private checkout's purity check does.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gitaudit.errors import RepositoryError
from gitaudit.git import index_stat
from gitaudit.git.call import run_git

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
                    with contextlib.suppress(RepositoryError):  # no such commit there: no stamps
                        walk(where, oid, f"{prefix}{path}/", depth + 1)
                continue
            try:
                found[prefix + path] = index_stat.stamp_of(os.lstat(where))
            except OSError:
                continue

    walk(workdir, tree, "", 0)
    return found
