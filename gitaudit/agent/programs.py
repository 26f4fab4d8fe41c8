"""What decides which program the hooks and the agent's later commands run: the places outside
the repository the guard (:class:`gitaudit.agent.guard.Places`) keeps the agent from writing.

* **gitaudit's installation** (:func:`installation`): the host runs ``git-audit agent
  stop|guard`` as found on its PATH, git runs the hook shims' interpreter. Code written there
  (a package file, the console script, a ``.pth`` file in the environment's site-packages,
  which runs at every start before gitaudit's first line) makes the stop hook and the guard
  answer what the agent wants.
* **programs named like git or gitaudit on PATH** (:func:`path_folders`, :data:`RUNNERS`): a
  ``git`` in ``~/.local/bin`` before the real one makes a later ``git commit``, which the guard
  reads as plain git, skip the hooks; a ``git-audit`` there answers for the hooks.
* **what shells source before a command** (:func:`startup_files`): Claude Code runs each
  ``Bash`` call in a fresh shell that first sources its session's shell snapshot (taken from
  the user's startup files) and ``$CLAUDE_ENV_FILE``; Codex runs a login shell, which reads
  the startup files each time. A function there (``git() { command git -c
  core.hooksPath=/dev/null "$@"; }``) changes what every later ``git commit`` runs, while the
  guard reads ``git commit``.

Standard library only and cheap: no process; a few ``stat`` calls and two short reads.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from collections.abc import Iterable

RUNNERS = ("git", "git-audit", "gitaudit")
"""The programs whose name the guard reads as git or gitaudit (``git audit`` runs
``git-audit``)."""

HOME_BINS = (".local/bin", "bin")
"""Folders of the home a login shell puts on PATH once they exist (Debian's and Ubuntu's
``~/.profile``), though the host's PATH may not hold them yet."""

HOME_STARTUP = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".bash_aliases",  # sourced by Debian's and Ubuntu's ~/.bashrc
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".claude/shell-snapshots",  # the snapshot each Bash call of a session sources
    ".claude/session-env",  # the files $CLAUDE_ENV_FILE names in a session (HOST_SOURCED)
)
ZSH_STARTUP = (".zshenv", ".zprofile", ".zshrc", ".zlogin")  # also under $ZDOTDIR
SYSTEM_STARTUP = (
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zshenv",
    "/etc/zprofile",
    "/etc/zshrc",
    "/etc/zlogin",
    "/etc/zsh",
)
STARTUP_VARIABLES = ("BASH_ENV", "ENV", "CLAUDE_ENV_FILE")  # files a shell sources first
HOST_SOURCED = ("shell-snapshots", "session-env")  # in Claude Code's configuration folder


def host_folder(folder: str) -> list[str]:
    """Where a host keeps the user configuration folder *folder* of the home (``.claude``,
    ``.codex``): there, and where its variable moves it (``$CLAUDE_CONFIG_DIR``: Claude Code's
    settings, shell snapshots and session environment files; ``$CODEX_HOME``: Codex's)."""
    found = [os.path.join(os.path.expanduser("~"), folder)]
    moved = os.environ.get(HOST_DIRS.get(folder, ""), "")
    return list(dict.fromkeys([*found, *([os.path.expanduser(moved)] if moved else [])]))


HOST_DIRS = {".claude": "CLAUDE_CONFIG_DIR", ".codex": "CODEX_HOME"}

_SHIM_PYTHON = re.compile(r"^PYTHON=(.*)$", re.MULTILINE)  # gitaudit.hooks.install.shim_text
_SHEBANG = re.compile(rb"#!\s*(/\S+)")


def installation(gitdirs: Iterable[str]) -> list[str]:
    """Where the hooks and the guard run gitaudit from, each as written and where it leads:
    this interpreter's code places (:func:`gitaudit.places.code_places`: its environment, its
    executable, its import path), this package, the user's site-packages when the
    interpreter reads it (its ``.pth`` files run too, even before the folder exists), the
    ``git-audit`` and ``gitaudit`` commands on PATH with the interpreter and environment each
    names, and the interpreter (and environment) of gitaudit's hook shims in *gitdirs*."""
    import site

    from gitaudit.places import code_places

    commands = [found for name in RUNNERS[1:] if (found := _which(name))]
    pythons = [p for p in map(_shebang, commands) if p]
    pythons += [
        p for g in dict.fromkeys(gitdirs) for n in ("pre-push", "commit-msg") if (p := _shim(g, n))
    ]
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    places = [*code_places(*commands, *pythons), package]
    places += [env for python in pythons if (env := _environment(python))]
    if site.ENABLE_USER_SITE:
        places.append(site.getusersitepackages())
    return _both(places)


def path_folders() -> list[str]:
    """The folders a command name is looked up in: PATH's (an empty entry is the current
    folder) and :data:`HOME_BINS`, each as written and where it leads."""
    home = os.path.expanduser("~")
    found = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return _both([*(f or os.curdir for f in found), *(os.path.join(home, b) for b in HOME_BINS)])


def startup_files() -> list[str]:
    """The files (and folders of them) a shell sources before the agent's commands run: the
    user's startup files, Claude Code's shell snapshots and session environment files (in
    ``$CLAUDE_CONFIG_DIR`` when it is set), the files ``$ZDOTDIR``, ``$BASH_ENV``, ``$ENV`` and
    ``$CLAUDE_ENV_FILE`` name, and the system's (``/etc/profile``, ``/etc/profile.d/``, ...)."""
    home = os.path.expanduser("~")
    found = [os.path.join(home, *name.split("/")) for name in HOME_STARTUP]
    zdotdir = os.environ.get("ZDOTDIR")
    if zdotdir:
        found += [os.path.join(os.path.expanduser(zdotdir), name) for name in ZSH_STARTUP]
    found += [os.path.expanduser(v) for n in STARTUP_VARIABLES if (v := os.environ.get(n))]
    found += [os.path.join(f, name) for f in host_folder(".claude") for name in HOST_SOURCED]
    return _both([*found, *SYSTEM_STARTUP])


def _both(places: Iterable[str]) -> list[str]:
    """*places* made absolute, each as written and where it leads (a link, ``~/.local/bin/
    git-audit`` into a pipx environment, names the same file)."""
    return list(
        dict.fromkeys(
            f(os.path.abspath(p)) for p in places for f in (os.path.normpath, os.path.realpath)
        )
    )


def _which(name: str) -> str | None:
    """The executable *name* on PATH, as a shell finds it (:func:`shutil.which` costs the
    guard the import of shutil)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


def _shebang(program: str) -> str | None:
    """The interpreter the script *program* names on its first line (``#!/venv/bin/python``,
    as pip writes a console script), or None."""
    try:
        with open(program, "rb") as handle:
            first = handle.read(512)
    except OSError:
        return None
    match = _SHEBANG.match(first)
    return os.fsdecode(match[1]) if match else None


def _shim(gitdir: str, name: str) -> str | None:
    """The interpreter gitaudit's hook shim *name* in *gitdir* runs (its ``PYTHON=`` line, as
    :func:`gitaudit.hooks.install.shim_python` reads it), or None."""
    import shlex

    try:
        with open(os.path.join(gitdir, "hooks", name), encoding="utf-8", errors="replace") as f:
            text = f.read(4096)
    except OSError:
        return None
    match = _SHIM_PYTHON.search(text)
    try:
        words = shlex.split(match[1]) if match else []
    except ValueError:
        return None
    return words[0] if len(words) == 1 and os.path.isabs(words[0]) else None


def _environment(python: str) -> str | None:
    """The virtual environment the interpreter *python* (``ENV/bin/python``) belongs to, or
    None."""
    folder = os.path.dirname(os.path.dirname(python))
    return folder if os.path.isfile(os.path.join(folder, "pyvenv.cfg")) else None
