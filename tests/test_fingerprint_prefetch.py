"""A fingerprint prefetched at start-up (``git audit status``) is the one computed on demand:
by its head start (a kept index names the user's index: :mod:`gitaudit.git.head_start`) or in
a thread (anything else, or ``head_start_tried``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitaudit.errors import RepositoryError
from gitaudit.git import fingerprint, head_start
from gitaudit.git.fingerprint import prefetch, private_folder, workspace_fingerprint
from gitaudit.git.index_files import TEMP_PREFIX
from tests.gitrepo import GitRepo


@pytest.mark.parametrize("how", ["head start", "thread"])
def test_a_prefetched_fingerprint_is_taken_once_for_its_own_work_tree(
    repo: GitRepo, how: str
) -> None:
    repo.write("new.txt", "untracked\n")
    expected = workspace_fingerprint(repo.path)  # keeps an index: the head start's case
    prefetch(repo.path, head_start_tried=how == "thread")
    assert bool(head_start._STARTED) == (how == "head start")
    assert bool(fingerprint._PREFETCHED) == (how == "thread")
    assert workspace_fingerprint(repo.path) == expected
    assert not fingerprint._PREFETCHED and not head_start._STARTED  # taken: computed afresh next
    repo.write("new.txt", "changed since\n")
    assert workspace_fingerprint(repo.path) != expected


def test_a_prefetch_of_another_work_tree_is_not_taken(repo: GitRepo, tmp_path: Path) -> None:
    other = GitRepo.create(tmp_path / "other")
    other.write("x.txt", "x\n")
    other.commit("other")
    workspace_fingerprint(other.path)  # kept: the next prefetch of it gets a head start
    prefetch(other.path)
    assert head_start._STARTED
    prefetch(other.path, head_start_tried=True)
    assert fingerprint._PREFETCHED
    assert workspace_fingerprint(repo.path).tree == repo.head_tree()
    assert not fingerprint._PREFETCHED and not head_start._STARTED
    assert not [p for p in private_folder(other.path / ".git").iterdir() if TEMP_PREFIX in p.name]


def test_a_failed_prefetch_is_computed_again_and_explained(tmp_path: Path) -> None:
    prefetch(tmp_path)  # not a repository: the thread fails quietly
    with pytest.raises(RepositoryError, match="not a git repository"):
        workspace_fingerprint(tmp_path)  # the same error as without a prefetch


def test_a_prefetch_returns_with_git_already_hashing_and_is_started_once(repo: GitRepo) -> None:
    repo.write("new.txt", "untracked\n")
    expected = workspace_fingerprint(repo.path)
    prefetch(repo.path, head_start_tried=True)
    (started,) = fingerprint._PREFETCHED
    # the caller goes on importing only once `git add -A` runs (or the thread gave up)
    assert started.hashing.is_set()
    prefetch(repo.path)  # `git audit status`: the entry point, then the fast path
    assert len(fingerprint._PREFETCHED) == 1 and not head_start._STARTED
    assert fingerprint._PREFETCHED[0] is started
    assert workspace_fingerprint(repo.path) == expected
    assert not fingerprint._PREFETCHED


@pytest.mark.parametrize("kept", [True, False])
def test_the_status_command_prefetches_before_anything_else_is_imported(
    repo: GitRepo, kept: bool
) -> None:
    """git starts hashing before the grammar, typing, pathlib, subprocess, hashlib or the
    fingerprint's module are imported (its head start), when an index is kept; else the
    fingerprint's thread starts before the grammar."""
    import subprocess
    import sys

    if kept:
        workspace_fingerprint(repo.path)
    heavy = ["gitaudit.cli.grammar", "typing", "pathlib", "subprocess", "hashlib"]
    probe = (
        "import sys\n"
        "from gitaudit.git import head_start\n"
        "seen = {}\n"
        "real = head_start.launch\n"
        "def spy(path):\n"
        "    if seen:\n"
        "        return real(path)  # the fast path's second call: the first one counts\n"
        f"    seen['loaded'] = [m for m in {heavy!r} if m in sys.modules]\n"
        "    seen['fingerprint'] = 'gitaudit.git.fingerprint' in sys.modules\n"
        "    seen['launched'] = real(path)\n"
        "    return seen['launched']\n"
        "head_start.launch = spy\n"
        "from gitaudit.cli.entry import main\n"
        "try:\n"
        "    main(['status'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(seen)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=repo.path, capture_output=True, text=True, check=True
    ).stdout
    seen = out.strip().splitlines()[-1]
    assert seen == str({"loaded": [], "fingerprint": False, "launched": kept})


@pytest.mark.parametrize("command", ["run", "status"])
def test_a_command_that_fails_early_leaves_no_private_index_behind(
    repo: GitRepo, command: str
) -> None:
    """`run` and `status` start hashing the work tree at once; one that stops at its first
    check (no plans here) still waits for that git to finish and its index to be removed."""
    from tests.gitrepo import audit

    for n in range(3000):  # enough untracked files that git is still hashing when it stops
        repo.write(f"many/{n}.txt", f"{n}\n")
    result = audit(repo.path, command, process=True)
    assert result.code != 0
    private = private_folder(repo.path / ".git")
    assert private.is_dir()  # the prefetch started
    left = sorted(p.name for p in private.iterdir())
    assert not [name for name in left if name.startswith(TEMP_PREFIX)], left


def test_a_prefetch_replaced_by_another_is_still_waited_for_at_exit(
    repo: GitRepo, tmp_path: Path
) -> None:
    other = GitRepo.create(tmp_path / "other")
    other.write("x.txt", "x\n")
    other.commit("other")
    prefetch(repo.path, head_start_tried=True)
    first = fingerprint._PREFETCHED[0]
    prefetch(other.path, head_start_tried=True)  # the first one is no longer the one to take
    assert fingerprint._PREFETCHED[0] is not first
    fingerprint._finish_prefetch()  # what the interpreter runs at exit
    assert not first.thread.is_alive() and not fingerprint._RUNNING
    for where in (repo.path, other.path):
        left = [p.name for p in private_folder(where / ".git").iterdir()]
        assert not [n for n in left if n.startswith(TEMP_PREFIX)], left
    fingerprint.drop_prefetch()


def test_the_fingerprint_imports_nothing_only_a_conversion_needs() -> None:
    """Every hook and the agent's stop imports the fingerprint: what only a converted file's
    comparison needs (a temporary object store: tempfile, random, shutil) is imported there."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import gitaudit.git.fingerprint"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
    modules = {line.rsplit("|", 1)[1].strip() for line in lines}
    assert "gitaudit.git.conversions" in modules  # the probe sees what is imported
    assert not {"tempfile", "random", "pygit2", "typing"} & modules
