"""Where gitaudit keeps per-user material (keys, the memo key): outside every work tree.

Standard library only, and light: the hooks' fast path imports it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def home_dir() -> str:
    """``$GITAUDIT_HOME``, else ``$XDG_CONFIG_HOME/gitaudit``, else ``~/.config/gitaudit``."""
    explicit = os.environ.get("GITAUDIT_HOME")
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(os.path.expanduser(xdg), "gitaudit")
    return os.path.join(os.path.expanduser("~"), ".config", "gitaudit")


def gitaudit_home() -> Path:
    """:func:`home_dir` as a path."""
    from pathlib import Path  # not at module level: pathlib costs the hooks' fast path 5 ms

    return Path(home_dir())
