"""Opening the repository gitaudit works on."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitaudit.errors import RepositoryError
from gitaudit.places import state_dir


@dataclass(frozen=True)
class Repo:
    """A pygit2 repository plus the paths gitaudit needs. ``workdir`` is None for a bare repo."""

    git: pygit2.Repository
    gitdir: Path
    workdir: Path | None

    @property
    def state_dir(self) -> Path:
        """``<gitdir>/gitaudit``: private caches (fingerprint index, lookups, high-water marks)."""
        return Path(state_dir(self.gitdir))

    def require_workdir(self) -> Path:
        if self.workdir is None:
            raise RepositoryError(
                f"{self.gitdir} is a bare repository and has no work tree",
                hint="run this in a clone with a work tree, or pass a revision",
            )
        return self.workdir

    def config(self, name: str) -> str | None:
        try:
            value = self.git.config[name]
        except (KeyError, pygit2.GitError):
            return None
        return str(value)


def open_repo(path: Path | str | None = None, *, from_env: bool = False) -> Repo:
    """Open the repository containing *path* (default: the current directory).

    With *from_env* the repository is opened as git's environment describes it (GIT_DIR,
    GIT_OBJECT_DIRECTORY, GIT_QUARANTINE_PATH ...), which is what a server hook must do to see
    the objects of a push still in quarantine.
    """
    if from_env:
        try:
            # libgit2 takes GIT_DIR, GIT_OBJECT_DIRECTORY and the alternates (the quarantine)
            # from the environment; the path is passed too so pygit2 knows where it is
            start = os.environ.get("GIT_DIR") or (str(path) if path is not None else ".")
            git = pygit2.Repository(start, pygit2.enums.RepositoryOpenFlag.FROM_ENV)
        except pygit2.GitError as exc:
            raise RepositoryError(
                f"cannot open the repository from git's environment: {exc}"
            ) from exc
    else:
        origin = Path(path) if path is not None else Path.cwd()
        found = pygit2.discover_repository(str(origin))
        if found is None:
            raise RepositoryError(
                f"{origin} is not inside a git repository",
                hint="run `git init` first, or cd into a repository",
            )
        git = pygit2.Repository(found)
    workdir = Path(git.workdir).resolve() if git.workdir and not git.is_bare else None
    return Repo(git=git, gitdir=Path(os.path.abspath(git.path)), workdir=workdir)
