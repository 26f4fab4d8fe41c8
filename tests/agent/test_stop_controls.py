"""The stop hook's clean-tree shortcut, at the unit level: :func:`gitaudit.agent.worktree.state`
takes ``HEAD^{tree}`` only for a work tree git shows clean, and every way of making git *show*
clean a work tree that is not sends it to the fingerprint; :func:`gitaudit.agent.stop.decide`
then blocks.

End to end (the installed hook command, as the host runs it):
``tests/adversarial/test_agent.py::test_attack_agent_hides_an_edit_from_git_status``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gitaudit.agent import stop, worktree
from gitaudit.errors import RepositoryError
from gitaudit.git.fingerprint import workspace_fingerprint
from tests.agent.host import CHECK, GREETER, run_passing, sealed_project
from tests.gitrepo import OLD_TIME, GitRepo, cached_trees, root_left_to_compute, with_cached_trees

EDITED = GREETER.replace("Hello", "Howdy")  # the same size: only the content tells


@pytest.fixture
def passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """A sealed project whose committed, clean work tree PASSes; the hook's project dir."""
    project = sealed_project(tmp_path / "project")
    run_passing(project)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project.path))
    monkeypatch.chdir(project.path)
    return project


def _stops(project: GitRepo) -> bool:
    """Whether the stop hook lets the agent stop (a plain Stop payload)."""
    raw = json.dumps({"hook_event_name": "Stop", "stop_hook_active": False}).encode()
    return stop.decide(raw).allow


Step = Callable[[GitRepo], object]
ALL = ("--untracked-files=all",)  # how the stop hook asks git status


def _assume_unchanged(project: GitRepo) -> None:
    project.git("update-index", "--assume-unchanged", "greeter.py")


def _skip_worktree(project: GitRepo) -> None:
    project.git("update-index", "--skip-worktree", "greeter.py")


def _fsmonitor(project: GitRepo) -> None:
    monitor = project.path.parent / "fsmonitor.sh"
    monitor.write_text("#!/bin/sh\nprintf '0\\0'\n")  # a token, and no changed path
    monitor.chmod(0o755)
    project.git("config", "core.fsmonitor", str(monitor))
    project.git("status")  # the monitor's token is now in the index


def _untracked_off(project: GitRepo) -> None:
    project.git("config", "status.showUntrackedFiles", "no")


def _untracked_cache(project: GitRepo) -> None:
    """The untracked cache on, ctime not trusted, and the cache filled for a folder whose
    mtime is in the past: a file added later, with the folder's mtime put back, is not seen."""
    project.git("config", "core.untrackedCache", "true")
    project.git("config", "core.trustctime", "false")
    os.utime(project.path, (1_000_000_000, 1_000_000_000))
    project.git("status")  # filled (git 2.39 caches only --untracked-files=normal)


def _edit(project: GitRepo) -> None:
    project.write("greeter.py", EDITED)


def _add_untracked(project: GitRepo) -> None:
    """A new file, the folder's times kept (as an agent covering its tracks would)."""
    before = os.stat(project.path)
    project.write("helper_notes.py", "HIDDEN = True\n")
    os.utime(project.path, ns=(before.st_atime_ns, before.st_mtime_ns))


# (name, how an edit is hidden from `git status`, the edit, the `git status` that is fooled)
HIDINGS: list[tuple[str, Step, Step, tuple[str, ...]]] = [
    ("assume-unchanged", _assume_unchanged, _edit, ALL),
    ("skip-worktree", _skip_worktree, _edit, ALL),
    ("fsmonitor", _fsmonitor, _edit, ALL),
    ("untracked-off", _untracked_off, _add_untracked, ()),
    ("untracked-cache", _untracked_cache, _add_untracked, ()),
]


def test_a_clean_work_tree_is_heads_tree_and_stops(passed: GitRepo) -> None:
    """The control: nothing hidden, nothing changed: HEAD's tree, and the PASS lets it stop."""
    tree, snap = worktree.state(str(passed.path))
    assert snap is not None and tree == passed.head_tree()
    assert _stops(passed)


@pytest.mark.parametrize(
    ("hide", "edit", "shown"), [h[1:] for h in HIDINGS], ids=[h[0] for h in HIDINGS]
)
def test_an_edit_hidden_from_git_status_is_fingerprinted(
    passed: GitRepo, hide: Step, edit: Step, shown: tuple[str, ...]
) -> None:
    """An edit git status does not show: the work tree's id is its fingerprint (the real
    content), not HEAD's tree, and the agent may not stop."""
    hide(passed)
    edit(passed)
    assert passed.git("status", "--porcelain", *shown) == ""  # git itself is fooled
    tree, snap = worktree.state(str(passed.path))
    assert snap is not None
    assert tree == workspace_fingerprint(passed.path).tree != passed.head_tree()
    assert not _stops(passed)


@pytest.mark.parametrize("where", ["root", "folder"])
def test_the_entries_not_the_cached_tree_ids_decide_clean(passed: GitRepo, where: str) -> None:
    """An edit of a file in a folder staged, then the tree ids the index caches for its folders
    set back to HEAD's by hand: `git status` skips a folder whose cached id is HEAD's and shows
    nothing. The entries are compared with HEAD's: the work tree's id is its fingerprint, and
    the agent may not stop."""
    index = passed.path / ".git" / "index"
    passed.git("write-tree")  # the index caches every folder's id
    proven = cached_trees(index.read_bytes())
    if where == "folder":
        proven = root_left_to_compute(proven)
    edited = passed.write("tests/check_greeting.py", CHECK + "# edited\n")
    os.utime(edited, ns=(OLD_TIME, OLD_TIME))  # never racily clean
    passed.git("add", "tests/check_greeting.py")
    index.write_bytes(with_cached_trees(index.read_bytes(), proven))
    assert passed.git("status", "--porcelain") == ""  # git itself is fooled
    tree, snap = worktree.state(str(passed.path))
    assert snap is not None
    assert tree == workspace_fingerprint(passed.path).tree != passed.head_tree()
    assert not _stops(passed)


@pytest.mark.parametrize("mark", [_assume_unchanged, _skip_worktree], ids=["assume", "skip"])
def test_marks_outside_the_project_folder_are_seen(
    passed: GitRepo, mark: Step, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project folder is a folder of the repository: the index is read whole, so a mark on
    a file outside that folder (greeter.py, at the root) is seen."""
    package = passed.path / "pkg"
    package.mkdir()
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(package))
    monkeypatch.chdir(package)
    assert worktree.state(str(package))[0] == passed.head_tree()  # clean: the control
    mark(passed)
    _edit(passed)
    assert passed.git("status", "--porcelain") == ""
    tree, snap = worktree.state(str(package))
    assert snap is not None
    assert tree == workspace_fingerprint(passed.path).tree != passed.head_tree()
    assert not _stops(passed)


def test_a_local_content_filter_goes_to_the_fingerprint(
    passed: GitRepo,
) -> None:
    """A clean filter of the repository's own configuration that answers HEAD's content
    whatever the file holds: git status shows the edited work tree clean. The shortcut is not
    taken, the fingerprint refuses such a work tree (by the filter's name), and the agent may
    not stop."""
    original = passed.path.parent / "greeter.orig"
    original.write_text(GREETER)
    passed.git("config", "filter.hide.clean", f"cat {original}")
    passed.write(".git/info/attributes", "greeter.py filter=hide\n")
    passed.write("greeter.py", EDITED)
    assert passed.git("status", "--porcelain") == ""  # git itself is fooled
    with pytest.raises(RepositoryError) as raised:
        worktree.state(str(passed.path))
    assert "defines content filters (filter.hide.clean)" in raised.value.message
    with pytest.raises(RepositoryError):  # the hook's entry point makes it a block
        _stops(passed)
