"""Which ``git`` (and ``ssh-keygen``) gitaudit runs: the first on ``PATH`` that the repository
does not hold.

gitaudit reads everything it judges through git (the fingerprint's ``git add -A``, the
checkout's ``read-tree``, the purity check's ``status``, the objects it verifies), so the
program that answers must not be one the audited side wrote. ``PATH`` is the caller's, and
anyone who can write ``.git/`` or the work tree could put a ``git`` there and start ``git audit
run`` with that folder first on ``PATH``: a ``git`` that checks out a passing tree while naming
the failing one, and says the checkout stayed clean, would have the run sign a PASS for bytes
that fail. So, as for the checks' own programs (:func:`gitaudit.pathsearch.checks_path`),
``git`` is looked up on ``PATH`` without its relative entries and without anything inside the
repository a command works in (every enclosing folder holding a ``.git``, the git directories
those name, a bare repository), in a repository this process opened (:func:`guard`: the checks
run in a private checkout elsewhere), or in gitaudit's cache (its private checkouts hold the
tree's files), links resolved. A ``git`` planted elsewhere and put on ``PATH`` is the caller's
environment, like a check's tool planted there (docs/threat-model.md). ``ssh-keygen``, which
signs with a key the SSH agent holds, is found the same way: it is handed what to sign.

``os`` and :mod:`gitaudit.places` alone: the fingerprint's head start asks before the rest of
gitaudit is imported. Each answer is kept for the process (a few ``stat`` calls the first time).
"""

from __future__ import annotations

import os

from gitaudit.places import cache_dir, inside

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_FOUND: dict[tuple[str, str, str, str], str] = {}  # answers while nothing more is guarded
_GUARDED: set[str] = set()  # real paths of the repositories this process opened (:func:`guard`)


def guard(*folders: str) -> None:
    """Keep every later ``git`` out of *folders* (and the repository each lies in) too,
    wherever that git is asked to work: a repository this process opened, whose checks run in
    a private checkout elsewhere (``git -C <checkout>``). A set of real paths, looked up by a
    path's folders: a process that opens thousands of repositories (a test run) pays nothing
    per git for them."""
    for folder in folders:
        for found in repository_folders(os.path.realpath(folder)):
            real = os.path.realpath(found)
            if real not in _GUARDED:
                _GUARDED.add(real)
                _FOUND.clear()


def git_program(near: str | os.PathLike[str] | None, env: Mapping[str, str]) -> str:
    """The ``git`` to start for a command in (or on the git directory) *near* (None: the
    current folder), found on *env*'s ``PATH`` outside the repository there and gitaudit's
    cache. FileNotFoundError, naming what was passed over, when there is none."""
    return outside("git", near, env)


def outside(name: str, near: str | os.PathLike[str] | None, env: Mapping[str, str]) -> str:
    """Program *name* as :func:`git_program` finds ``git`` (``ssh-keygen``, which signs)."""
    where = os.path.realpath(os.fspath(near) if near is not None else os.getcwd())
    path, cache = env.get("PATH", os.defpath), cache_dir()
    key = (name, path, where, cache)
    found = _FOUND.get(key)
    if found is None:
        found = _FOUND[key] = _search(name, path, [*repository_folders(where), cache])
    return found


def repository_folders(where: str) -> list[str]:
    """Every folder at or above *where* that holds a ``.git`` or is a git directory, and the git
    directories a ``.git`` file or a ``commondir`` file names; past the first, none at or above
    the home folder (a home kept as a repository of dotfiles would keep out ``~/.local/bin``
    for every project in it, while its own commands still keep it out)."""
    found: list[str] = []
    home = os.path.realpath(os.path.expanduser("~"))
    folder = where
    while True:
        if found and (folder == home or home.startswith(folder.rstrip(os.sep) + os.sep)):
            return found
        dot = os.path.join(folder, ".git")
        if os.path.lexists(dot):
            found.append(folder)
            if not os.path.isdir(dot):
                found += _named_git_dirs(dot)
        elif os.path.isfile(os.path.join(folder, "HEAD")) and os.path.isdir(
            os.path.join(folder, "objects")
        ):
            found += [folder, *_common_dir(folder)]
        parent = os.path.dirname(folder)
        if parent == folder:
            return found
        folder = parent


def _named_git_dirs(dot: str) -> list[str]:
    """The git directory a ``.git`` file names (``gitdir: X``), and its common directory."""
    try:
        with open(dot, encoding="utf-8", errors="surrogateescape") as handle:
            line = handle.readline(4096).strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    named = os.path.join(os.path.dirname(dot), line.removeprefix("gitdir:").strip())
    return [named, *_common_dir(named)]


def _common_dir(git_dir: str) -> list[str]:
    """The common directory a linked worktree's git directory names (``commondir``), and the
    main work tree that holds it when it is a ``.git`` folder (the agent in a linked worktree
    writes the main one too: its ``.venv/bin`` may be on ``PATH``)."""
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            line = handle.readline(4096).strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not line:
        return []
    common = os.path.realpath(os.path.join(git_dir, line))
    main = os.path.dirname(common)
    return [common, main] if os.path.basename(common) == ".git" else [common]


def _search(name: str, path: str, excluded: list[str]) -> str:
    passed_over = []
    for entry in path.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        candidate = os.path.join(entry, name)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        if any(_kept_out(place, excluded) for place in (entry, candidate)):
            passed_over.append(candidate)
            continue
        return candidate
    if passed_over:
        raise FileNotFoundError(
            f"the only {name} on PATH lies in the repository or gitaudit's cache "
            f"({', '.join(passed_over)}), and gitaudit never runs a program those hold: put "
            f"a {name} outside them first on PATH"
        )
    raise FileNotFoundError(f"{name}: not found on PATH")


def _kept_out(place: str, excluded: list[str]) -> bool:
    """Whether *place*, links resolved, lies in one of *excluded* or a guarded repository."""
    if inside(place, *excluded):
        return True
    folder = os.path.realpath(place)
    while True:
        if folder in _GUARDED:
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
