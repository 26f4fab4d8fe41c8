"""Where gitaudit keeps things, named once.

* The user's **gitaudit home** (:func:`home_dir`): keys and the memo key, outside every work
  tree.
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


def state_dir(gitdir: str | os.PathLike[str]) -> str:
    """``<gitdir>/gitaudit``: gitaudit's private caches for the repository at *gitdir* (for a
    linked worktree, its own git dir)."""
    return os.path.join(os.fspath(gitdir), STATE_DIRNAME)


def gitaudit_home() -> Path:
    """:func:`home_dir` as a path."""
    from pathlib import Path  # not at module level: pathlib costs the hooks' fast path 5 ms

    return Path(home_dir())
