"""The fingerprint's head start: git hashes before gitaudit is imported, and its result is
taken only when the kept index it started from is vouched for (:mod:`gitaudit.git.head_start`)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from gitaudit import secret
from gitaudit.errors import RepositoryError
from gitaudit.git import fingerprint, head_start, index_files
from gitaudit.git.fingerprint import private_folder, workspace_fingerprint
from gitaudit.git.index_files import TEMP_PREFIX
from tests.gitrepo import OLD_TIME, GitRepo
from tests.test_fingerprint import truth_throwaway_index, warm_files


def _leftovers(repo: GitRepo) -> list[str]:
    """The per-process files left in the work tree's private folder."""
    folder = private_folder(repo.path / ".git")
    return sorted(p.name for p in folder.glob("*") if TEMP_PREFIX in p.name)


@pytest.mark.parametrize("untracked", [1, 3000])
def test_the_usual_case_starts_git_and_its_result_is_the_fingerprint(
    repo: GitRepo, untracked: int
) -> None:
    """git's report goes to a file, not a pipe nobody reads while gitaudit imports: 3,000
    untracked files (a report of about 100 KiB, more than a pipe holds) do not stall it."""
    for n in range(untracked):
        repo.write(f"new/a-rather-long-folder-name/{n:05}.txt", f"{n}\n")
    expected = workspace_fingerprint(repo.path)  # keeps an index for the user's index
    assert head_start.launch(repo.path)
    (started,) = head_start._STARTED
    assert started.process is not None  # git is hashing already
    assert head_start.launch(repo.path / "new")  # the same work tree: started once
    assert len(head_start._STARTED) == 1 and head_start._STARTED[0] is started
    assert workspace_fingerprint(repo.path) == expected
    assert not head_start._STARTED
    assert _leftovers(repo) == []


@pytest.mark.parametrize("case", ["nothing kept", "user index changed", "no commit", "filters"])
def test_anything_but_the_usual_case_is_left_to_the_fingerprint(
    repo: GitRepo, tmp_path: Path, case: str
) -> None:
    if case == "no commit":
        repo = GitRepo.create(tmp_path / "empty")
        repo.write("a.txt", "a\n")
    if case != "nothing kept":
        workspace_fingerprint(repo.path)
    if case == "user index changed":
        repo.write("a.txt", "a\n")
        repo.git("add", "a.txt")
    if case == "filters":
        repo.git("config", "filter.x.smudge", "cat")  # the fingerprint decides about these
    assert not head_start.launch(repo.path)
    assert not head_start._STARTED
    assert _leftovers(repo) == []
    assert workspace_fingerprint(repo.path).tree == truth_throwaway_index(repo.path)


def _forged_kept_index(repo: GitRepo, path: str, blob: str) -> bytes:
    """An index whose entry for *path* has the file's current stat data and *blob*: what a
    kept index written by anyone but gitaudit could say."""
    forged = repo.path.parent / "forged.index"
    env = {**os.environ, "GIT_INDEX_FILE": str(forged)}
    for args in (["read-tree", "HEAD"], ["add", path]):
        subprocess.run(["git", *args], cwd=repo.path, env=env, check=True)
    data = forged.read_bytes()
    staged = subprocess.run(
        ["git", "ls-files", "-s", path], cwd=repo.path, env=env, check=True, capture_output=True
    ).stdout.split()[1]
    body = data[:-20].replace(bytes.fromhex(staged.decode()), bytes.fromhex(blob))
    return body + hashlib.sha1(body).digest()


@pytest.mark.parametrize("how", ["replaced", "rewritten in place"])
def test_a_kept_index_written_by_someone_else_is_not_taken(repo: GitRepo, how: str) -> None:
    """The head start copies the kept index unchecked: an edit with its entry forged (the edited
    file's stat data, the committed blob) makes git's result the committed tree. The tag no
    longer vouches for the file, so that result is thrown away and every file is hashed."""
    committed = repo.git("rev-parse", "HEAD:README.md").strip()
    assert workspace_fingerprint(repo.path).clean
    [kept] = warm_files(repo)
    edited = repo.write("README.md", "edited\n")
    os.utime(edited, ns=(OLD_TIME, OLD_TIME))  # never racily clean
    forged = _forged_kept_index(repo, "README.md", committed)
    if how == "replaced":
        kept.with_name("forged").write_bytes(forged)
        os.replace(kept.with_name("forged"), kept)
    else:
        with open(kept, "r+b") as handle:
            handle.write(forged)
            handle.truncate()
    assert head_start.launch(repo.path)  # the kept index still names the user's index
    expected = truth_throwaway_index(repo.path)
    assert expected != repo.head_tree()
    assert workspace_fingerprint(repo.path).tree == expected
    assert _leftovers(repo) == []


def test_a_kept_index_written_after_the_copy_is_not_taken(repo: GitRepo) -> None:
    """Nothing may write the kept index between the head start's copy and the check of its tag
    (the copy would not be what the tag vouches for)."""
    assert workspace_fingerprint(repo.path).clean
    [kept] = warm_files(repo)
    assert head_start.launch(repo.path)
    started = head_start.take(repo.path)
    assert started is not None
    with open(kept, "r+b") as handle:  # the same bytes, written again: only its times change
        handle.write(handle.read())
    layout = fingerprint._locate(repo.path)
    assert fingerprint._take(layout, started) is None
    assert _leftovers(repo) == []


def test_git_failing_after_its_head_start_is_explained_as_without_one(repo: GitRepo) -> None:
    assert workspace_fingerprint(repo.path).clean
    subprocess.run(["git", "init", "-q", str(repo.path / "sub")], check=True)  # no commit
    with pytest.raises(RepositoryError) as without:
        workspace_fingerprint(repo.path)
    assert head_start.launch(repo.path)
    with pytest.raises(RepositoryError) as taken:
        workspace_fingerprint(repo.path)
    assert str(taken.value) == str(without.value)
    assert "cannot fingerprint the work tree" in str(taken.value)
    assert _leftovers(repo) == []


def test_a_head_start_nobody_takes_is_stopped_and_removed_at_exit(repo: GitRepo) -> None:
    for n in range(2000):  # git still hashing when the process ends
        repo.write(f"many/{n}.txt", f"{n}\n")
    workspace_fingerprint(repo.path)
    assert head_start.launch(repo.path)
    (started,) = head_start._STARTED
    head_start._discard_at_exit()  # what the interpreter runs at exit
    assert started.process is not None and started.process.returncode is not None
    assert not head_start._STARTED
    assert _leftovers(repo) == []
    assert started.kept is not None and started.kept.fd == -1


def test_a_head_start_of_another_work_tree_is_not_taken(repo: GitRepo, tmp_path: Path) -> None:
    other = GitRepo.create(tmp_path / "other")
    other.write("x.txt", "x\n")
    other.commit("other")
    workspace_fingerprint(other.path)
    workspace_fingerprint(repo.path)
    assert head_start.launch(repo.path)
    (first,) = head_start._STARTED
    assert head_start.launch(other.path)  # one at a time: the first is stopped and removed
    assert first not in head_start._STARTED and first.process is not None
    assert first.process.returncode is not None and _leftovers(repo) == []
    assert workspace_fingerprint(repo.path).tree == repo.head_tree()
    assert not head_start._STARTED
    assert _leftovers(other) == []


def _slot(repo: GitRepo) -> str:
    git_dir = str(repo.path / ".git")
    return head_start.warm_path(str(private_folder(repo.path / ".git")), git_dir, git_dir)


@pytest.mark.parametrize(
    "args",
    [
        ("remote", "add", "origin", "https://example.test/repo.git"),
        ("config", "branch.main.remote", "origin"),
        ("config", "user.email", "someone@example.test"),
        ("config", "audit.signingKey", "/elsewhere/key"),
    ],
)
def test_config_writes_that_never_change_hashing_keep_the_kept_index(
    repo: GitRepo, args: tuple[str, ...]
) -> None:
    """`git push -u`, `git remote add`, an identity or gitaudit's own settings write the
    repository's config, but nothing `git add` reads: the kept index stays in use (before, any
    write of the file made the next fingerprint hash every file)."""
    assert workspace_fingerprint(repo.path).clean
    slot = _slot(repo)
    repo.git(*args)
    assert _slot(repo) == slot
    assert head_start.launch(repo.path)  # the kept index still applies
    assert workspace_fingerprint(repo.path).clean


@pytest.mark.parametrize(
    "text",
    [
        "[core]\n\tautocrlf = VALUE\n",
        "[Core]\n\tAutoCRLF = VALUE\n",
        '[remote "x"][core] autocrlf = VALUE\n',  # a second header on the line
        '[core]\n\texcludesFile = x\r[remote "y"]\n\tautocrlf = VALUE\n',  # \r breaks no line
        '[remote "z"]\n\turl = a\n[core]\n\tautocrlf = VALUE\n',
        # a continued value: git reads the header-like line as part of it, and stays in core
        '[core]\n\texcludesFile = a\\\n[remote "x"]\n\tautocrlf = VALUE\n',
        "[include]\n\tpath = VALUE.cfg\n",  # an include: the file counts whole
    ],
)
def test_a_config_write_that_may_change_hashing_changes_the_kept_index(
    repo: GitRepo, text: str
) -> None:
    """Whatever git may read as another setting than an inert one counts: a new kept index,
    every file hashed. In each of these git reads core.autocrlf from the line changed (or the
    file includes another); the text around it is there before the first fingerprint."""
    config = repo.path / ".git" / "config"
    original = config.read_bytes()
    config.write_bytes(original + text.replace("VALUE", "false").encode())
    if "autocrlf" in text:
        assert repo.git("config", "--get", "core.autocrlf").strip() == "false"
    assert workspace_fingerprint(repo.path).clean
    slot = _slot(repo)
    if "include" not in text:  # (an include has no head start: the fingerprint decides)
        assert head_start.launch(repo.path) and head_start.take(repo.path)  # kept: applies
    # (`input`: `true` would make a checkout write CRLF line ends, and is refused there)
    config.write_bytes(original + text.replace("VALUE", "input").encode())
    if "autocrlf" in text:
        assert repo.git("config", "--get", "core.autocrlf").strip() == "input"
    assert _slot(repo) != slot
    assert not head_start.launch(repo.path)
    assert workspace_fingerprint(repo.path).tree == truth_throwaway_index(repo.path)


def kept_long_ago(repo: GitRepo, seconds: float) -> None:
    """Make the kept index what gitaudit leaves when it kept it *seconds* ago and nothing
    changed since: modified then (its change time stays now: nobody can set that back), with
    the tag gitaudit wrote for it then."""
    [kept] = warm_files(repo)
    tagged = index_files.open_kept(kept)
    assert tagged is not None
    tagged.close()
    then = time.time() - seconds
    os.utime(kept, (then, then))
    key = secret.local_key(str(repo.path), create=False)
    assert key is not None
    fd = os.open(kept, os.O_RDONLY)
    try:
        statement = index_files._statement(kept.name, fd, os.fstat(fd), tagged.basis, tagged.tree)
    finally:
        os.close(fd)
    tag = f"{secret.mac(key, statement)} {tagged.tree} {tagged.basis}"
    index_files.write_atomic(index_files.tag_path(kept), tag)


@pytest.mark.parametrize("who", ["this process", "another process"])
def test_a_seed_copied_from_an_old_kept_index_is_not_swept_as_debris(
    repo: GitRepo, who: str
) -> None:
    """The seed keeps the kept index's modification time (git's racy-entry rule needs it): a
    kept index older than the debris age made the sweep take the live seed for a crashed
    process's leftover, and `git write-tree` then read the missing index as an empty one, so a
    clean checkout fingerprinted as the empty tree (the stop hook of a work tree unchanged for
    15 minutes ran the whole gate every time)."""
    long_ago = time.time() - 2 * 3600  # older than the kept index: no entry is racily clean
    for name in repo.git("ls-files").split():
        os.utime(repo.path / name, (long_ago, long_ago))
    assert workspace_fingerprint(repo.path).clean
    kept_long_ago(repo, index_files.STALE_AFTER_SECONDS + 60)
    assert head_start.launch(repo.path)
    (started,) = head_start._STARTED
    assert started.process is not None
    started.process.wait()  # git found nothing to write: the seed is the private index
    if who == "another process":  # the sweep of a fingerprint started meanwhile
        index_files.sweep(private_folder(repo.path / ".git"))
    print_ = workspace_fingerprint(repo.path)
    assert print_.tree == repo.head_tree() and print_.clean
    assert _leftovers(repo) == []


def test_a_private_index_removed_while_git_hashes_fails_the_fingerprint(repo: GitRepo) -> None:
    """Whatever removes the private index before `git write-tree` reads it, the fingerprint
    refuses to answer rather than give the empty tree."""
    assert workspace_fingerprint(repo.path).clean  # a kept index for the user's index
    repo.write("README.md", "changed\n")  # git rewrites the private index: write-tree is needed
    assert head_start.launch(repo.path)
    (started,) = head_start._STARTED
    assert started.process is not None
    started.process.wait()
    os.unlink(started.temp)
    with pytest.raises(RepositoryError, match="was removed while git hashed"):
        workspace_fingerprint(repo.path)
    assert _leftovers(repo) == []


@pytest.mark.parametrize("how", ["plain", "through a symlink", "from a subfolder", "linked"])
def test_where_the_head_start_found_the_repository_is_what_the_memo_asks_git(
    repo: GitRepo, tmp_path: Path, how: str
) -> None:
    """The stop hook's memo snapshot takes the repository's place from the head start instead
    of asking git again: the snapshot (paths, state digest, anchors) is the same either way."""
    from gitaudit.gate import memo

    repo.write("sub/file.txt", "x\n")
    repo.commit("sub")
    root: Path = repo.path
    if how == "through a symlink":
        (tmp_path / "alias").symlink_to(repo.path)
        root = tmp_path / "alias"
    elif how == "from a subfolder":
        root = repo.path / "sub"
    elif how == "linked":
        repo.git("worktree", "add", "-q", str(tmp_path / "linked"))
        root = tmp_path / "linked"
    workspace_fingerprint(root)  # keeps an index: the head start may start
    assert head_start.launch(root)
    where = head_start.located(root)
    assert where is not None
    asked = memo.snapshot(root)
    told = memo.snapshot(root, located=where)
    assert asked is not None and told == asked
    assert told[0].digest == asked[0].digest
    if how == "linked":
        assert where[0] != where[2]  # its own git dir, the main one's common dir
    assert head_start.located(tmp_path) is None  # not a work tree it started for
    fingerprint.workspace_fingerprint(root)  # takes the head start
    assert head_start.located(root) is None
