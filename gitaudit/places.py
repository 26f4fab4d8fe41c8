"""Where gitaudit keeps things, named once.

* The user's **gitaudit home** (:func:`home_dir`): keys, the memo key and the repositories'
  trust anchors (:func:`anchor_path`), outside every work tree.
* A repository's **state directory** (:func:`state_dir`, ``<gitdir>/gitaudit``): caches that can
  always be rebuilt (the fingerprint's private indexes, the lookup cache, the high-water marks,
  the verdict memo). git never reads it.

Standard library only, and light: the hooks' fast path imports it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


STATE_DIRNAME = "gitaudit"


def home_dir() -> str:
    """``$GITAUDIT_HOME``, else ``$XDG_CONFIG_HOME/gitaudit``, else ``~/.config/gitaudit``."""
    explicit = os.environ.get("GITAUDIT_HOME")
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(os.path.expanduser(xdg), "gitaudit")
    return os.path.join(os.path.expanduser("~"), ".config", "gitaudit")


ANCHORS_DIRNAME = "anchors"


def anchor_path(where: str | os.PathLike[str]) -> str:
    """``$GITAUDIT_HOME/anchors/<sha256 of the real path of *where*>.json``: the trust anchor of
    the repository whose git common directory (or main work tree) is *where*
    (:mod:`gitaudit.ledger.anchor`)."""
    import hashlib  # not at module level: only anchors need it

    real = os.path.realpath(os.fspath(where))
    name = hashlib.sha256(os.fsencode(real)).hexdigest()
    return os.path.join(home_dir(), ANCHORS_DIRNAME, f"{name}.json")


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


def state_dir(gitdir: str | os.PathLike[str]) -> str:
    """``<gitdir>/gitaudit``: gitaudit's private caches for the repository at *gitdir* (for a
    linked worktree, its own git dir)."""
    return os.path.join(os.fspath(gitdir), STATE_DIRNAME)


def gitaudit_home() -> Path:
    """:func:`home_dir` as a path."""
    from pathlib import Path  # not at module level: pathlib costs the hooks' fast path 5 ms

    return Path(home_dir())
