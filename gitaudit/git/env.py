"""The environment for the git processes gitaudit starts (standard library only: the hooks' fast
path uses it)."""

from __future__ import annotations

import os

# set by git for a hook or an alias; each names one repository, index or prefix, and the
# repository is always passed explicitly (``--git-dir``) or discovered from the working directory
_REPOSITORY_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR")


def git_env() -> dict[str, str]:
    """The caller's environment minus the repository variables a calling git set. Object
    directories are kept: a server hook's git must see the quarantined objects of a push."""
    env = dict(os.environ)
    for var in _REPOSITORY_VARS:
        env.pop(var, None)
    return env
