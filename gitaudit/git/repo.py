"""Opening the repository gitaudit works on, so that it reads the objects as they are stored.

libgit2 applies ``info/grafts`` and the ``shallow`` file to every commit it parses (measured with
libgit2 1.9: ``parent_ids``, ``walk``, ``descendant_of``, ``merge_base`` and ``revparse_single``
all see the grafted parents), and has no switch to turn that off; it never honours
``refs/replace/*``. A process that can write ``.git/`` could otherwise reparent a ledger commit
for the gate alone: hide a newer FAIL run from the lookup cache's confirmation walk, or make a
rewound plans ref descend from its high-water mark. So the repository gitaudit reads is
:class:`StoredHistory`: an in-memory repository (which has no grafts and no shallow file) over the
real object and ref databases, taking its configuration, paths and remotes from the real one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from gitaudit import executables
from gitaudit.errors import RepositoryError
from gitaudit.frozen import frozen
from gitaudit.places import entered_worktree, require_entered, state_dir


class StoredHistory(pygit2.Repository):
    """*opened*'s objects and refs, read as stored: no grafts, no shallow cut (see the module
    docstring). Everything else (configuration, paths, identity, remotes) is *opened*'s."""

    def __init__(self, opened: pygit2.Repository) -> None:
        super().__init__()  # in memory: libgit2 loads no grafts and no shallow file for it
        self.set_odb(opened.odb)
        self.set_refdb(pygit2.Refdb.open(opened))
        if opened.workdir and not opened.is_bare:
            self.workdir = opened.workdir
        self._opened = opened  # owns the ref database's backend: kept alive with this one
        self.remotes = opened.remotes
        self.submodules = opened.submodules

    @property
    def config(self) -> pygit2.RepositoryConfig:
        return self._opened.config

    @property
    def path(self) -> str:
        return str(self._opened.path)

    @path.setter
    def path(self, value: str) -> None:
        raise AttributeError("path is read-only")

    @property
    def default_signature(self) -> pygit2.Signature:
        return self._opened.default_signature

    @default_signature.setter
    def default_signature(self, value: pygit2.Signature) -> None:
        raise AttributeError("default_signature is read-only")


@frozen
class Repo:
    """A pygit2 repository (:class:`StoredHistory`) plus the paths gitaudit needs. ``workdir`` is
    None for a bare repo."""

    git: pygit2.Repository
    gitdir: Path
    workdir: Path | None
    entered: Path | None = None  # the folder whose .git led here (places.entered_worktree)

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


def _opened(where: str, gitdir: str) -> pygit2.Repository:
    """libgit2's repository at *where*; RepositoryError, in one line, when libgit2 refuses it:
    the configuration at *gitdir* (which anything that writes ``.git/`` can edit) names a
    format it does not support (``core.repositoryformatversion``, ``extensions.*``: SHA-256
    objects, reftable refs) or does not parse."""
    try:
        return pygit2.Repository(where)
    except (pygit2.GitError, ValueError) as exc:  # pygit2.InvalidError is a ValueError
        why = str(exc).removeprefix(f"{where}: ")
        config = os.path.join(gitdir, "config")
        raise RepositoryError(
            f"cannot open the repository at {where}: {why}",
            hint=f"fix or remove that setting in {config} (gitaudit reads SHA-1 repositories "
            "with files refs, format version 0 or 1)",
        ) from None


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
        except (pygit2.GitError, ValueError) as exc:
            raise RepositoryError(
                f"cannot open the repository from git's environment: {exc}"
            ) from exc
        entered = None
    else:
        origin = Path(path) if path is not None else Path.cwd()
        found_in = entered_worktree(origin)
        entered = Path(found_in) if found_in is not None else None
        found = pygit2.discover_repository(str(origin))
        if found is None:
            raise RepositoryError(
                f"{origin} is not inside a git repository",
                hint="run `git init` first, or cd into a repository",
            )
        # opened from the work tree, as git finds it: libgit2 then takes the work tree from a
        # `gitdir:` file's folder (a --separate-git-dir clone, a redirected .git), where the git
        # dir opened by itself would name its own parent folder
        git = _opened(str(origin if origin.is_dir() else origin.parent), found)
    workdir = Path(git.workdir).resolve() if git.workdir and not git.is_bare else None
    if workdir is not None and not from_env:
        require_entered(workdir, path if path is not None else Path.cwd())
    gitdir = Path(os.path.abspath(git.path))
    executables.guard(*(str(p) for p in (workdir, gitdir, entered) if p is not None))
    return Repo(git=StoredHistory(git), gitdir=gitdir, workdir=workdir, entered=entered)
