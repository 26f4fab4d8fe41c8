"""Which ``git`` gitaudit starts: the first on PATH that the repository does not hold."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gitaudit import executables
from gitaudit.errors import RepositoryError
from gitaudit.executables import git_program, repository_folders
from gitaudit.git.call import run_git
from gitaudit.git.repo import open_repo
from tests.gitrepo import GitRepo

REAL = shutil.which("git")


def _planted(folder: Path) -> Path:
    """A ``git`` in *folder* that leaves a mark when it runs, then runs the real one."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "git"
    fake.write_text(f'#!/bin/sh\ntouch "{folder}/ran"\nexec {REAL} "$@"\n')
    fake.chmod(0o755)
    return fake


def _env(*first: Path | str) -> dict[str, str]:
    return {"PATH": os.pathsep.join([*map(str, first), os.environ["PATH"]])}


@pytest.mark.parametrize("where", [".git/bin", "bin", "sub/deeper/bin"])
def test_a_git_the_repository_holds_is_passed_over(repo: GitRepo, where: str) -> None:
    fake = _planted(repo.path / where)
    assert git_program(repo.path, _env(fake.parent)) == REAL
    assert git_program(repo.path / ".git", _env(fake.parent)) == REAL  # near the git dir too


def test_a_link_elsewhere_into_the_repository_is_passed_over(repo: GitRepo, tmp_path: Path) -> None:
    fake = _planted(repo.path / ".git" / "bin")
    (tmp_path / "tools").symlink_to(fake.parent)
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "git").symlink_to(fake)
    for entry in (tmp_path / "tools", tmp_path / "one"):
        assert git_program(repo.path, _env(entry)) == REAL


def test_relative_entries_are_passed_over(repo: GitRepo) -> None:
    _planted(repo.path / "bin")
    assert git_program(repo.path / "bin", {"PATH": f".:bin:{os.environ['PATH']}"}) == REAL


def test_a_git_outside_the_repository_is_the_callers(repo: GitRepo, tmp_path: Path) -> None:
    """Elsewhere is the caller's environment, as for the checks' programs (the shim of a test,
    a wrapper the user installed)."""
    fake = _planted(tmp_path / "wrapper")
    assert git_program(repo.path, _env(fake.parent)) == str(fake)


def test_a_linked_worktree_keeps_out_the_main_repository(repo: GitRepo, tmp_path: Path) -> None:
    repo.git("worktree", "add", "-q", str(tmp_path / "wt"))
    folders = repository_folders(os.path.realpath(tmp_path / "wt"))
    assert os.path.realpath(repo.path / ".git") in {os.path.realpath(f) for f in folders}
    fake = _planted(repo.path / ".git" / "bin")
    assert git_program(tmp_path / "wt", _env(fake.parent)) == REAL


def test_a_linked_worktree_keeps_out_the_main_work_tree(repo: GitRepo, tmp_path: Path) -> None:
    """The main work tree of a linked worktree elsewhere (its ``.venv/bin`` on PATH) holds no
    git gitaudit runs in the linked one, opened or not."""
    repo.git("worktree", "add", "-q", str(tmp_path / "wt"))
    fake = _planted(repo.path / ".venv" / "bin")
    assert git_program(tmp_path / "wt", _env(fake.parent)) == REAL
    open_repo(tmp_path / "wt")
    assert git_program(tmp_path / "elsewhere", _env(fake.parent)) == REAL


def test_a_repository_opened_is_kept_out_of_git_run_elsewhere(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks run in a private checkout outside the repository (``git -C <checkout>``): the
    repository this process opened is kept out there too."""
    monkeypatch.setattr(executables, "_GUARDED", set())
    fake = _planted(repo.path / ".git" / "bin")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert git_program(elsewhere, _env(fake.parent)) == str(fake)
    open_repo(repo.path)
    assert git_program(elsewhere, _env(fake.parent)) == REAL


def test_when_only_the_repository_holds_a_git_it_is_named(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _planted(repo.path / ".git" / "bin")
    with pytest.raises(FileNotFoundError, match=r"only git on PATH lies in the repository"):
        git_program(repo.path, {"PATH": str(fake.parent)})
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(RepositoryError, match=r"never runs a program those hold"):
        run_git(["status"], cwd=repo.path)
    assert not (fake.parent / "ran").exists()


def test_run_git_never_runs_the_planted_one(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _planted(repo.path / ".git" / "bin")
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    assert run_git(["rev-parse", "--git-dir"], cwd=repo.path).code == 0
    assert not (fake.parent / "ran").exists()


def test_ssh_keygen_is_found_the_same_way(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh-keygen signs with a key the SSH agent holds: one the repository holds would be
    handed whatever gitaudit asks it to sign."""
    real = shutil.which("ssh-keygen")
    folder = repo.path / ".git" / "bin"
    folder.mkdir()
    (folder / "ssh-keygen").write_text("#!/bin/sh\nexit 0\n")
    (folder / "ssh-keygen").chmod(0o755)
    env = {"PATH": f"{folder}:{os.environ['PATH']}"}
    if real is None:
        with pytest.raises(FileNotFoundError, match="only ssh-keygen on PATH lies in"):
            executables.outside("ssh-keygen", repo.path, env)
    else:
        assert executables.outside("ssh-keygen", repo.path, env) == real


def test_a_home_kept_as_a_repository_keeps_out_only_its_own_commands(tmp_path: Path) -> None:
    """A home that is a repository of dotfiles: a git in ``~/.local/bin`` is the one a project
    inside the home runs (the home is not the repository the command works in), while a command
    working in the home itself keeps it out."""
    home = Path(os.path.expanduser("~"))
    run_git(["init", "-q", str(home)])
    project = home / "src" / "project"
    run_git(["init", "-q", str(project)])
    tool = _planted(home / ".local" / "bin")
    env = _env(tool.parent)
    assert git_program(project, env) == str(tool)
    assert git_program(home, env) == REAL
    planted = _planted(project / ".git" / "bin")
    assert git_program(project, _env(planted.parent, tool.parent)) == str(tool)
