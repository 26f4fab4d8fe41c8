"""Where gitaudit keeps things, named once.

* The user's **gitaudit home** (:func:`home_dir`): keys, the memo key and the repositories'
  trust anchors (:func:`anchor_path`), outside every work tree.
* A repository's **state directory** (:func:`state_dir`, ``<gitdir>/gitaudit``): caches that can
  always be rebuilt (the lookup cache, the verdict memo). git never reads it. What guards the
  refs, which linked worktrees share (the high-water marks), is kept in the common dir's
  (:func:`shared_state_dir`).
* The user's **cache directory** (:func:`cache_dir`): the private checkouts the checks run in,
  one folder per repository (:func:`checkouts_dir`), and the workspace fingerprint's private
  indexes, one folder per work tree (:func:`fingerprint_dir`). They live outside the project
  directory so that nothing in it (an ignored ``conftest.py``, ``node_modules``, a ``.git``) is
  found by a tool that looks upwards from a check's directory, and so that an agent confined
  to the project cannot edit them.

Standard library only, and light: the hooks' fast path imports it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing costs the fast paths about 6 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any


STATE_DIRNAME = "gitaudit"


def _sha256() -> Callable[[bytes], object]:
    for builtin in ("_sha2", "_sha256"):  # Python 3.12 on, 3.11
        try:
            return __import__(builtin).sha256  # type: ignore[no-any-return]
        except ImportError:
            continue
    import hashlib

    return hashlib.sha256


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of *data* (hex) by the interpreter's built-in implementation when it has
    one: ``hashlib`` loads OpenSSL first, about 4 ms the fast paths and the fingerprint's head
    start do without. The same digest either way."""
    digest: Any = _sha256()(data)
    return str(digest.hexdigest())


def home_dir() -> str:
    """``$GITAUDIT_HOME``, else ``$XDG_CONFIG_HOME/gitaudit``, else ``~/.config/gitaudit``."""
    explicit = os.environ.get("GITAUDIT_HOME")
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(os.path.expanduser(xdg), "gitaudit")
    return os.path.join(os.path.expanduser("~"), ".config", "gitaudit")


def global_git_config() -> list[str]:
    """Where git reads the user's global configuration: ``~/.gitconfig``, the folder
    ``$XDG_CONFIG_HOME/git`` (or ``~/.config/git``: its ``config``, ``attributes``,
    ``ignore``), and the file ``$GIT_CONFIG_GLOBAL`` names. gitaudit trusts it like the key
    folder (the driver of a declared content filter comes from it): the checks' fence
    (:mod:`gitaudit.checks.fence`) and the agent's guard (:mod:`gitaudit.agent.guard`) keep
    it from being written."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git")]
    named = os.environ.get("GIT_CONFIG_GLOBAL")
    if named:
        found.append(os.path.expanduser(named))
    return found


ANCHORS_DIRNAME = "anchors"


def anchor_path(where: str | os.PathLike[str]) -> str:
    """``$GITAUDIT_HOME/anchors/<sha256 of the real path of *where*>.json``: the trust anchor of
    the repository whose git common directory (or main work tree) is *where*
    (:mod:`gitaudit.ledger.anchor`)."""
    real = os.path.realpath(os.fspath(where))
    name = sha256_hex(os.fsencode(real))
    return os.path.join(home_dir(), ANCHORS_DIRNAME, f"{name}.json")


MARKS_DIRNAME = "marks"


def marks_path(gitdir: str | os.PathLike[str]) -> str:
    """``$GITAUDIT_HOME/marks/<sha256 of the real path of the common dir of *gitdir*>.json``:
    the copy of the repository's high-water marks kept out of the work tree's reach
    (:mod:`gitaudit.ledger.watermark`), keyed like :func:`shared_state_dir`. OSError when
    ``commondir`` cannot be read."""
    real = common_dir(gitdir)
    return os.path.join(home_dir(), MARKS_DIRNAME, f"{sha256_hex(os.fsencode(real))}.json")


LOCKS_DIRNAME = "locks"


def run_lock_path(gitdir: str | os.PathLike[str], plan: str) -> str:
    """``$GITAUDIT_HOME/locks/<sha256 of the real path of the common dir of *gitdir* and
    *plan*>.flock``: the lock that keeps runs of a plan with steps that are not idempotent
    apart, out of the work tree's reach. A lock file in ``.git/`` is the agent's to delete while
    a run holds it, and the next run then locks a new file (a deploy twice at once). OSError
    when ``commondir`` cannot be read."""
    key = sha256_hex(os.fsencode(common_dir(gitdir)) + b"\0" + plan.encode("utf-8"))
    return os.path.join(home_dir(), LOCKS_DIRNAME, f"{key}.flock")


def entered_worktree(start: str | os.PathLike[str]) -> str | None:
    """The nearest folder at or above *start* holding a ``.git`` (folder or ``gitdir:`` file):
    where git's discovery enters a repository from *start*, so the work tree a user there
    means, whatever that ``.git`` leads to. None when there is none (a bare repository)."""
    here = os.path.realpath(os.fspath(start))
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def require_entered(work_tree: str | os.PathLike[str], start: str | os.PathLike[str]) -> None:
    """RepositoryError unless *work_tree* (what git reports) is the folder whose ``.git`` git
    entered from *start*: ``core.worktree`` in that ``.git``'s config (which anything that
    writes ``.git/`` can set) would have git read, and a verdict judge, another folder: a clean
    copy of the proven tree, say, while this one holds edits."""
    entered = entered_worktree(start)
    if entered is not None and os.path.realpath(os.fspath(work_tree)) == entered:
        return
    from gitaudit.errors import RepositoryError

    raise RepositoryError(
        f"git reports {os.fspath(work_tree)} as the work tree of {entered or start}: "
        "core.worktree (or a .git leading elsewhere) points git at another folder, whose "
        "content would be judged instead",
        hint="remove the setting (`git config --unset core.worktree`) and judge the folder itself",
    )


def common_dir(gitdir: str | os.PathLike[str]) -> str:
    """The real path of the git common directory of the repository at *gitdir* (for a linked
    worktree, the main repository's; git's own rule: ``<gitdir>/commondir``, relative to it or
    absolute). OSError when that file exists but cannot be read."""
    gitdir = os.fspath(gitdir)
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            text = handle.read().strip()
    except (FileNotFoundError, NotADirectoryError):
        text = ""
    return os.path.realpath(os.path.join(gitdir, text) if text else gitdir)


def state_dir(gitdir: str | os.PathLike[str]) -> str:
    """``<gitdir>/gitaudit``: gitaudit's private caches for the repository at *gitdir* (for a
    linked worktree, its own git dir)."""
    return os.path.join(os.fspath(gitdir), STATE_DIRNAME)


def shared_state_dir(gitdir: str | os.PathLike[str]) -> str:
    """``<common dir>/gitaudit``: what gitaudit keeps of the refs themselves (the high-water
    marks), which a linked worktree shares with the main one, as it shares the refs: kept in
    the worktree's own git dir, a ref rewound from a linked worktree met no mark there (and
    the main worktree's marks never learned what the linked one saw). For a main worktree this
    is :func:`state_dir`. OSError when ``commondir`` cannot be read."""
    return os.path.join(common_dir(gitdir), STATE_DIRNAME)


def cache_dir() -> str:
    """``$GITAUDIT_CACHE``, else ``$XDG_CACHE_HOME/gitaudit``, else ``~/.cache/gitaudit``."""
    explicit = os.environ.get("GITAUDIT_CACHE")
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(os.path.expanduser(xdg), "gitaudit")
    return os.path.join(os.path.expanduser("~"), ".cache", "gitaudit")


def _repository_cache(kind: str, gitdir: str | os.PathLike[str]) -> str:
    """``<cache>/<kind>/<digest of the real path of *gitdir*>``."""
    real = os.path.realpath(os.fspath(gitdir))
    key = sha256_hex(real.encode("utf-8", "surrogateescape"))[:20]
    return os.path.join(cache_dir(), kind, key)


def checkouts_dir(gitdir: str | os.PathLike[str]) -> str:
    """The private checkouts of the repository at *gitdir*: keyed by its real path."""
    return _repository_cache("checkouts", gitdir)


def fingerprint_dir(gitdir: str | os.PathLike[str]) -> str:
    """The private indexes of the workspace fingerprint of the work tree whose (per-worktree)
    git dir is *gitdir*: keyed by its real path, outside the git dir, where a process that
    writes ``.git`` (the agent being audited) cannot swap them while git reads them."""
    return _repository_cache("fingerprint", gitdir)


def inside(path: str | os.PathLike[str], *roots: str | os.PathLike[str]) -> bool:
    """Whether *path* is one of *roots* or lies inside one, symbolic links resolved: a key or
    a cache folder must not lie in the repository it serves (an environment variable may put
    it anywhere)."""
    real = os.path.realpath(os.fspath(path))
    for root in roots:
        top = os.path.realpath(os.fspath(root))
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return True
    return False


def code_places(*programs: str) -> list[str]:
    """Where this interpreter loads code from: its installation (a virtual environment's
    folder), its executable, the folders of its import path other than the first (the
    script's or the current one), and *programs* (paths of commands that will run gitaudit).
    Code there runs as gitaudit: a ``.pth`` file in a site-packages folder runs at every start
    of the interpreter, before gitaudit's first line."""
    import sys

    found = (sys.prefix, sys.exec_prefix, sys.executable, *sys.path[1:], *programs)
    return [place for place in found if place]


def code_inside(workdir: str | os.PathLike[str], *programs: str) -> str | None:
    """The first of :func:`code_places` (with *programs*) that lies inside *workdir*; None when
    none does. Code there is anyone's who writes the work tree: a ``.pth`` file in a virtual
    environment inside it would make the hooks judge with the agent's code."""
    for place in code_places(*programs):
        if inside(place, workdir):
            return place
    return None


def require_code_outside(workdir: str | os.PathLike[str] | None, *programs: str) -> None:
    """HookError when gitaudit runs from inside the work tree *workdir* (:func:`code_inside`: a
    virtual environment of the project, say), before hooks that would run it are installed:
    the agent could change the code they run. Nothing for a repository without a work tree."""
    found = code_inside(workdir, *programs) if workdir is not None else None
    if found is None:
        return
    from gitaudit.errors import HookError

    raise HookError(
        f"gitaudit runs from {found}, inside the work tree {os.fspath(workdir or '')}: whatever "
        "writes the work tree (the agent) could change the code the hooks run",
        hint="install gitaudit outside the project (`pipx install gitaudit`, or a virtual "
        "environment elsewhere) and install the hooks with that `git-audit`",
    )


def gitaudit_home() -> Path:
    """:func:`home_dir` as a path."""
    from pathlib import Path  # not at module level: pathlib costs the hooks' fast path 5 ms

    return Path(home_dir())
