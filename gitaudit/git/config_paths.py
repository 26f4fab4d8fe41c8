"""The files and folders git's configuration names elsewhere, which are trusted like it.

gitaudit trusts the user's and the system's git configuration like its key folder (the agent's
guard and the checks' fence keep it from being written): a content filter or an attributes line
there decides what the fingerprint hashes, ``core.hooksPath`` which hooks run. What that
configuration *names* decides as much, so :func:`named_by_config` lists it, for the guard and
the fence to keep as they keep the configuration:

* every file an ``include.path`` or ``includeIf.<condition>.path`` names (whatever its
  condition): it is configuration too, the whole of it (a filter, ``core.attributesFile``,
  ``core.autocrlf``, ``core.hooksPath``);
* the attributes file ``core.attributesFile`` names: ``*.sh text eol=crlf`` there made a
  script with CRLF line ends, which fails, the checkout of the proven tree;
* the hooks folder ``core.hooksPath`` names, where gitaudit's shims are installed;
* the programs of the content filters (``filter.<name>.clean``/``smudge``/``process``): every
  word of the command that names a path, and the program a bare first word is found as on
  ``PATH``; a declared filter's driver writes the bytes a run's checks read.

Keys that name files gitaudit does not depend on are left out: ``core.excludesFile`` (the work
tree's ``.gitignore`` ignores as much), ``core.fsmonitor`` (off for every git gitaudit asks about
a work tree: :data:`gitaudit.git.environment.AS_IT_IS`), ``diff.<x>.textconv`` (no verdict reads a
diff), ``core.sshCommand`` and ``gpg.ssh.*`` (gitaudit signs and verifies without git's signing
configuration). The configuration is read as git reads it in the work tree, includes followed,
in every scope but the command's own (``git -c``, ``GIT_CONFIG_*``: the caller's, for that
command only). Standard library only: the guard runs before every tool call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from gitaudit.git.call import run_git

NAMING = (
    r"^(include\.path|includeif\..*\.path|core\.(attributesfile|hookspath)"
    r"|filter\..*\.(clean|smudge|process))$"
)
"""The keys whose values name files (``git config --get-regexp``, names in lower case)."""


def named_by_config(work_tree: str | os.PathLike[str] | None, *, on_path: bool = True) -> list[str]:
    """The absolute paths (as named, not resolved) that the git configuration read in
    *work_tree* (None: the current folder, outside any repository) names: see the module
    docstring; without *on_path*, not the programs a filter names by a bare name. Empty when
    git cannot read the configuration (a broken one: git then refuses every command that
    would read it)."""
    proc = run_git(
        ["config", "--includes", "--show-scope", "--show-origin", "-z", "--get-regexp", NAMING],
        cwd=work_tree,
        check=False,
    )
    if proc.code != 0:
        return []
    base = os.path.abspath(os.fspath(work_tree)) if work_tree is not None else os.getcwd()
    fields = proc.stdout.split(b"\0")
    found: list[str] = []
    for i in range(0, len(fields) - 2, 3):
        scope, origin = fields[i].decode(), os.fsdecode(fields[i + 1])
        key, _, value = os.fsdecode(fields[i + 2]).partition("\n")
        if scope == "command" or not value:
            continue
        if key.startswith("include"):  # relative to the file that includes it
            folder = os.path.join(base, os.path.dirname(origin.removeprefix("file:")))
            found.append(_absolute(value, folder))
        elif key.startswith("core."):
            found.append(_absolute(value, base))
        else:
            found += _programs(value, base, on_path=on_path)
    return [path for path in dict.fromkeys(found) if _may_hold_configuration(path)]


def _may_hold_configuration(path: str) -> bool:
    """Not a device (``core.attributesFile = /dev/null`` and ``core.hooksPath = /dev/null``
    switch the feature off: every command writes ``/dev/null``) nor the root folder."""
    if path == os.sep:
        return False
    return not os.path.exists(path) or os.path.isfile(path) or os.path.isdir(path)


def _absolute(path: str, folder: str) -> str:
    return os.path.normpath(os.path.join(folder, os.path.expanduser(path)))


def for_fence(work_tree: str | os.PathLike[str]) -> list[str]:
    """What a run's fence keeps of :func:`named_by_config` (:func:`gitaudit.checks.fence.
    for_run`): not the programs a filter names by a bare name (installed tools: the fence would
    wall off a whole system folder such as ``/usr/bin`` to keep one), nor paths in the work
    tree *work_tree* (the checks run in a checkout, and a fenced path there would take the
    work tree's own folders from a live step). The guard keeps both from the agent."""
    root = os.path.realpath(work_tree)
    return [
        path
        for path in named_by_config(work_tree, on_path=False)
        if not _beneath(os.path.realpath(path), root)
    ]


def _beneath(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _programs(command: str, base: str, *, on_path: bool) -> list[str]:
    """The files the filter driver *command* (a shell command git runs in the work tree's root)
    names: each word holding a ``/`` that names no folder (a program not there yet is one
    the agent could make; ``/`` of ``tr / _`` is none), and the program a bare first word is
    on ``PATH``."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found = [path for w in words if "/" in w and not os.path.isdir(path := _absolute(w, base))]
    if on_path and words and "/" not in words[0]:
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            program = os.path.join(folder or os.curdir, words[0])
            if os.path.isfile(program) and os.access(program, os.X_OK):
                found.append(os.path.abspath(program))
                break
    return found


DRIVER_KEYS = (".clean", ".smudge", ".process", ".required")


def filter_drivers(names: Iterable[str]) -> dict[str, str]:
    """The drivers of the content filters *names* in the global git configuration this
    process's git reads, as a run's checkout applies them: ``NAME.clean`` (``.smudge``,
    ``.process``, ``.required``) -> its value, as a run records them. Which file that is, the
    caller's ``HOME``, ``XDG_CONFIG_HOME`` and ``GIT_CONFIG_GLOBAL`` say: a judge where the run
    was made asks again with its own (:mod:`gitaudit.ledger.programs`)."""
    found: dict[str, str] = {}
    for name in sorted(set(names)):
        proc = run_git(
            ["config", "--global", "--get-regexp", rf"^filter\.{re.escape(name)}\."], check=False
        )
        pairs = [line.split(" ", 1) for line in proc.out.splitlines() if " " in line]
        found.update({k.removeprefix("filter."): v for k, v in pairs if k.endswith(DRIVER_KEYS)})
    return found
