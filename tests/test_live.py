"""What a ``workspace: live`` run compares of the work tree beyond its fingerprint
(gitaudit/git/live.py): the stamps of the tree's files, and the state of its submodules."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gitaudit.git import live
from gitaudit.git.fingerprint import tree_of
from tests.gitrepo import GitRepo


def _with_submodule(tmp_path: Path) -> GitRepo:
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "broken\n")
    lib.commit("v1")
    repo = GitRepo.create(tmp_path / "repo")
    repo.write("a.txt", "a\n")
    os.symlink("a.txt", repo.path / "link")
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "lib")
    repo.commit("files")
    return repo


def test_stamps_cover_the_trees_files_links_and_submodule_files(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    (repo.path / "untracked.txt").write_text("not the tree's\n")
    stamps = live.tracked_stamps(repo.path, tree_of(repo.path, "HEAD"))
    assert set(stamps) == {".gitmodules", "a.txt", "link", "lib/verdict"}
    assert live.tracked_stamps(repo.path, tree_of(repo.path, "HEAD")) == stamps  # reads move none


def test_a_file_written_and_put_back_moves_its_stamp(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    tree = tree_of(repo.path, "HEAD")
    before = live.tracked_stamps(repo.path, tree)
    for rel in ("a.txt", "lib/verdict"):
        path = repo.path / rel
        kept, data = os.stat(path), path.read_bytes()
        path.write_text("ok\n")
        path.write_bytes(data)
        os.utime(path, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    after = live.tracked_stamps(repo.path, tree)
    assert {p for p in before if after[p] != before[p]} == {"a.txt", "lib/verdict"}


def test_a_submodule_is_faithful_only_as_its_commit(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    tree = tree_of(repo.path, "HEAD")
    assert live.unfaithful_submodules(repo.path, tree) == []
    (repo.path / "lib" / ".git-not-a-file").write_text("x\n")  # untracked in lib
    assert live.unfaithful_submodules(repo.path, tree) == ["lib"]
    (repo.path / "lib" / ".git-not-a-file").unlink()
    assert live.unfaithful_submodules(repo.path, tree) == []
    GitRepo(repo.path / "lib").git("commit", "-q", "--allow-empty", "-m", "moved")
    assert live.unfaithful_submodules(repo.path, tree) == ["lib"]  # another commit checked out


def test_a_submodule_not_checked_out_must_be_an_empty_folder(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    tree = tree_of(repo.path, "HEAD")
    (repo.path / "lib" / ".git").unlink()
    assert live.unfaithful_submodules(repo.path, tree) == ["lib"]  # its files, no .git
    shutil.rmtree(repo.path / "lib")
    assert live.unfaithful_submodules(repo.path, tree) == []  # absent
    (repo.path / "lib").mkdir()
    assert live.unfaithful_submodules(repo.path, tree) == []  # empty, as a clone leaves it


def test_a_submodule_not_checked_out_is_left_alone(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    clone = tmp_path / "clone"
    GitRepo(tmp_path).git("clone", "-q", str(repo.path), str(clone))
    tree = tree_of(clone, "HEAD")
    assert live.unfaithful_submodules(clone, tree) == []
    assert set(live.tracked_stamps(clone, tree)) == {".gitmodules", "a.txt", "link"}
