"""The tree id of the work tree for the stop hook, fast when the work tree is clean.

The gate's fingerprint (:func:`gitaudit.git.fingerprint.workspace_fingerprint`) is exact in
every case and costs three git processes in a row. An agent usually stops on a committed,
clean work tree, whose fingerprint is ``HEAD^{tree}``; that is shown with git processes run
side by side with the verdict memo's own:

* ``git status --porcelain -z --untracked-files=all --ignore-submodules=none``, with the file
  system monitor and the untracked cache switched off, git's stat comparison in full and
  ``core.ignorecase`` as the file system does (as the fingerprint does), says nothing:
  no staged, unstaged, deleted, untracked (non-ignored) or submodule change;
* ``git ls-files --stage -v`` shows exactly the entries of ``git ls-tree -r HEAD``, none
  marked assume-unchanged or skip-worktree (status trusts those marks, and the tree ids the
  index caches for its folders; the fingerprint does not);
* the repository's own configuration defines no content filter (the fingerprint refuses those,
  and must be the one to say so);
* git's work tree is the folder holding the ``.git`` it entered (no ``core.worktree`` pointing
  it at another folder: the fingerprint refuses that, and must be the one to say so).

Then the work tree is ``HEAD^{tree}``, resolved by the memo's snapshot. Anything else (a change,
a mark, a filter, a repository without commits, a git that fails) falls back to the
fingerprint. Standard library only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gitaudit.git.call import as_it_is, start_git
from gitaudit.places import entered_worktree

if TYPE_CHECKING:
    from gitaudit.gate import memo


def state(root: str) -> tuple[str, memo.Snapshot | None]:
    """The work tree's tree id and the memo's snapshot of the repository at *root*."""
    from gitaudit.gate import memo

    entered = entered_worktree(root)
    top = entered or root  # the listings cover the whole work tree, whatever folder *root* is
    settings = as_it_is(top)
    status = start_git(
        [
            *settings,
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=none",
        ],
        cwd=root,
    )
    listing = start_git([*settings, "ls-files", "--stage", "-v", "-z"], cwd=top)
    committed = start_git(
        ["ls-tree", "-r", "-z", "--full-tree", f"--format={_ENTRY}", "HEAD"], cwd=top
    )
    try:
        found = memo.snapshot(root, revs=["HEAD"])
    finally:
        changes, _ = status.communicate()
        entries, _ = listing.communicate()
        tree, _ = committed.communicate()
    snap = found[0] if found is not None else None
    clean = (
        found is not None
        and os.path.realpath(found[0].workdir) == entered  # no core.worktree
        and status.returncode == 0
        and listing.returncode == 0
        and committed.returncode == 0
        and not changes
        and _entries_are(entries, tree)
        and not _local_filters(found[0].gitdir)
    )
    if clean and found is not None:
        return found[1][0], snap
    from gitaudit.git.fingerprint import workspace_fingerprint

    return workspace_fingerprint(root).tree, snap


_ENTRY = "H %(objectmode) %(objectname) 0%x09%(path)"
"""An entry of ``git ls-tree`` as ``git ls-files --stage -v`` writes one in the index: at stage
0, tagged ``H`` (cached: neither marked nor unmerged)."""


def _entries_are(listing: bytes, tree: bytes) -> bool:
    """Whether ``git ls-files --stage -v -z`` (*listing*) shows exactly the entries of
    ``git ls-tree -r`` (*tree*, in :data:`_ENTRY`'s form), each tagged ``H``: none marked
    assume-unchanged (a lower-case tag) or skip-worktree (``S``), none unmerged (``M``).

    ``git status`` compares the index with HEAD folder by folder, trusting the tree id the
    index caches for a folder (its ``TREE`` extension, which anyone who writes ``.git`` can
    set to HEAD's while the entries hold an edit), and trusts those marks: the entries
    themselves are compared here, byte for byte."""
    return listing == tree


def _local_filters(gitdir: str) -> bool:
    """Whether the repository's own configuration (of its common dir, and of a linked work
    tree) may define a content filter."""
    common = gitdir
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            common = os.path.normpath(os.path.join(gitdir, handle.read().strip()))
    except FileNotFoundError:
        pass
    except OSError:
        return True
    for path in (os.path.join(common, "config"), os.path.join(gitdir, "config.worktree")):
        try:
            with open(path, "rb") as handle:
                if b"filter" in handle.read().lower():
                    return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False
