"""The ref listings of :mod:`gitaudit.ledger.refs`: every ref under a prefix, as git lists it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gitaudit.git.repo import open_repo
from gitaudit.ledger.refs import MIRROR, list_refs, mirrored_runs, ref_names
from tests.gitrepo import GitRepo

COPY = f"{MIRROR}/origin/audit/runs/default"


def _link_up(refs: Path) -> None:
    (refs / "a").mkdir()
    (refs / "a" / "up").symlink_to("..")


STOPPERS: dict[str, Callable[[Path], None]] = {
    "a dangling link": lambda refs: (refs / "a").symlink_to("/nonexistent"),
    "a link to itself": lambda refs: (refs / "a").symlink_to("a"),
    "a link to a parent folder": _link_up,
}


@pytest.mark.parametrize("stopper", list(STOPPERS))
def test_a_loose_ref_is_listed_past_an_entry_libgit2_stops_at(repo: GitRepo, stopper: str) -> None:
    """libgit2's listing ends silently at an entry under refs/ it cannot stat; git's does not,
    and neither does gitaudit's."""
    head = repo.git("rev-parse", "HEAD").strip()
    repo.git("update-ref", COPY, head)
    repo.git("update-ref", "refs/audit/runs/default", head)
    STOPPERS[stopper](repo.path / ".git" / "refs")
    git = open_repo(repo.path).git
    assert COPY not in list(git.references)  # what libgit2 alone lists
    assert COPY in ref_names(git, MIRROR + "/")
    assert mirrored_runs(git, "default") == {"origin": COPY}
    assert str(list_refs(git, "refs/audit/runs/")["refs/audit/runs/default"]) == head


def test_packed_and_loose_refs_are_listed_once(repo: GitRepo) -> None:
    """Control: packed refs come from libgit2's listing, loose ones from both, each once; a
    lock file is no ref."""
    head = repo.git("rev-parse", "HEAD").strip()
    repo.git("update-ref", COPY, head)
    repo.git("update-ref", f"{MIRROR}/packed/audit/runs/default", head)
    repo.git("pack-refs", "--all")
    repo.git("update-ref", COPY, head)  # loose again, beside its packed line
    mirror = repo.path / ".git" / MIRROR / "origin" / "audit" / "runs"
    (mirror / "default.lock").write_text(head + "\n")
    git = open_repo(repo.path).git
    assert ref_names(git, MIRROR + "/") == sorted([COPY, f"{MIRROR}/packed/audit/runs/default"])


def test_a_linked_worktree_lists_the_common_refs(repo: GitRepo, tmp_path: Path) -> None:
    """Control: from a linked worktree the loose refs are read from the common dir."""
    head = repo.git("rev-parse", "HEAD").strip()
    repo.git("update-ref", COPY, head)
    linked = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "--detach", str(linked), "HEAD")
    os.symlink("/nonexistent", repo.path / ".git" / "refs" / "a")
    assert mirrored_runs(open_repo(linked).git, "default") == {"origin": COPY}


def test_a_marked_copy_is_named_even_when_gone(repo: GitRepo) -> None:
    """A copy a mark names is one of the plan's copies, present or not; other marks are not."""
    git = open_repo(repo.path).git
    assert mirrored_runs(git, "default", {COPY, "refs/audit/runs/default"}) == {"origin": COPY}
    assert mirrored_runs(git, "other", {COPY}) == {}
