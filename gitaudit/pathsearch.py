"""The programs checks start by name: the PATH they are found on, and what it finds there.

A check's ``PATH`` is its caller's, cleaned of relative entries and of folders inside the
repository or gitaudit's cache (:func:`checks_path`: a private checkout there holds the tree's
files at a path anyone can work out, so a tree's ``bin/python3`` would shadow the system's).
Whoever starts ``git audit run`` still chooses the rest of it: a folder of its own put first
(``PATH=/tmp/x:$PATH git audit run``) runs a ``pytest`` that exits 0 in place of the real one.
So a run records the folders of its checks' PATH (:func:`folders`: as spelled and with links
resolved) and, for each check that started a program by name, the name, the folder it was found
in and the executable (:func:`found`), and a judge that holds the key the run was signed with
(the run was made where the judge stands) asks whether its own PATH, cleaned the same way, holds
each of those folders and offers each program from its folder (:class:`Offers`: in any place on
it, so a PATH that orders its folders otherwise, or repeats some, still binds). A folder of the
agent's own (``/tmp/x``, a virtual environment it made whose ``python3`` links to the system's,
or whose ``bin`` is a link to the system's folder) is on no PATH but the one it started the run
with, whether a check named the program in it or a program found it there (``npm`` its
``node``, a shell check its commands): that run proves nothing to the judge
(:mod:`gitaudit.gate.evidence`), nor does a PASS remembered from it
(:mod:`gitaudit.gate.memo`).

Standard library only, and light: the verdict memo's lookup (the hooks' fast path) uses it.
"""

from __future__ import annotations

import os

from gitaudit.places import cache_dir, home_dir

TYPE_CHECKING = False  # not typing's: the hooks' fast path does without it (gitaudit.named)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence


def checks_path(
    value: str, repository: Sequence[str | os.PathLike[str]], git_exec: str | None = None
) -> str:
    """*value* (a PATH) without relative entries, without folders inside *repository* (the
    work tree and git dir) or gitaudit's cache, and without *git_exec* (``$GIT_EXEC_PATH``):
    git puts its own programs' folder first on the PATH of a command it starts (``git audit
    run``), where the user's PATH has none; a check's ``git`` finds it without the PATH."""
    kept = []
    tops = [os.path.realpath(os.fspath(r)).rstrip(os.sep) for r in (*repository, cache_dir())]
    own = os.path.realpath(git_exec) if git_exec else None
    for entry in value.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)  # what places.inside compares, the roots resolved once
        if real == own or any(real == top or real.startswith(top + os.sep) for top in tops):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)


# (program, the PATH folder it was found in, the executable found): links resolved in both
Started = tuple[str, str | None, str | None]


def found(program: str, path: str) -> tuple[str, str] | None:
    """(the folder, links resolved, and the executable, links resolved) of the first entry of
    *path* holding an executable file named *program* (a name, no folder); None when none does.
    What :func:`shutil.which` finds on POSIX, without importing :mod:`shutil` (and
    :mod:`fnmatch`) on the hooks' fast path."""
    for folder in path.split(os.pathsep):
        candidate = os.path.join(folder, program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return os.path.realpath(folder), os.path.realpath(candidate)
    return None


def find(program: str, path: str) -> str | None:
    """The executable :func:`found` finds for *program* on *path*, links resolved, or None."""
    place = found(program, path)
    return place[1] if place is not None else None


def folders(path: str) -> list[str]:
    """The folders of *path*, each as spelled (normalised) and with links resolved, once each,
    in order. Both: a program may find its files by the folder it was started from, not by the
    real one (``python3`` reached through ``/tmp/v/bin``, a link to ``/usr/bin``, reads
    ``/tmp/v/pyvenv.cfg`` and runs the ``.pth`` files of ``/tmp/v/lib``)."""
    spelled = (f for e in path.split(os.pathsep) if e for f in _forms(e))
    return list(dict.fromkeys(spelled))


def _forms(entry: str) -> tuple[str, str]:
    """*entry* as spelled (``//``, ``.``, a trailing ``/`` dropped, as a program normalising
    its path sees it; a leading ``//`` is ``/`` here) and with links resolved (as the system
    opens what is below it)."""
    spelled = os.path.normpath(entry)
    return spelled[1:] if spelled.startswith("//") else spelled, os.path.realpath(entry)


class Offers:
    """What a PATH offers: each of its folders by its real path, resolved once, and the
    folders it names (:func:`folders`)."""

    def __init__(self, path: str) -> None:
        self.folders: dict[str, str] = {}
        self.named: set[str] = set()
        for entry in path.split(os.pathsep):
            if entry:
                spelled, real = _forms(entry)
                self.folders.setdefault(real, entry)
                self.named.update((spelled, real))

    def lacks(self, wanted: Iterable[str]) -> str | None:
        """The first of *wanted* (folders as :func:`folders` lists them) this PATH does not
        name, as spelled or with links resolved."""
        return next((f for f in wanted if f not in self.named), None)

    def unoffered(self, started: Iterable[Started]) -> Started | None:
        """The first of *started* this PATH does not offer: none of its folders is the one the
        program was found in (links resolved; in any place on PATH, not only the first), or it
        no longer holds that executable there. None when it offers each."""
        for item in started:
            program, folder, executable = item
            entry = self.folders.get(folder) if folder is not None else None
            if entry is None:
                return item
            candidate = os.path.join(entry, program)
            if not os.access(candidate, os.X_OK) or os.path.isdir(candidate):
                return item
            if os.path.realpath(candidate) != executable:
                return item
        return None


TRUSTED_FILE = "trusted-path"  # in the gitaudit home: folders a judge takes as its PATH's too


def with_trusted(path: str) -> str:
    """*path* (a judge's) and the folders the user lists in ``<gitaudit home>/trusted-path``
    (absolute, one a line, ``#`` comments): a folder a host puts on its agent's shell's PATH
    only (a ``SessionStart`` hook's ``CLAUDE_ENV_FILE``, Homebrew's ``gnubin``) is on the
    runs' PATH and never on the hooks'; listed there, runs made with it bind. The home is the
    user's (the agent's guard refuses it), as the keys there are; a file that cannot be read
    lists nothing."""
    try:
        with open(os.path.join(home_dir(), TRUSTED_FILE), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, ValueError):
        return path
    listed = [f for f in (line.strip() for line in lines) if os.path.isabs(f)]
    return os.pathsep.join([path, *listed]) if listed else path


def offered(
    started: Iterable[Started],
    wanted: Iterable[str],
    repository: Sequence[str | os.PathLike[str]],
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Whether this process's PATH (*environ*'s), cleaned for *repository* as the checks' PATH
    is, holds each folder of *wanted* and offers each of *started* (:class:`Offers`)."""
    offers = judge_offers(repository, environ)
    return offers.lacks(wanted) is None and offers.unoffered(started) is None


def judge_offers(
    repository: Sequence[str | os.PathLike[str]], environ: Mapping[str, str] | None = None
) -> Offers:
    """What a judge's PATH (*environ*'s, this process's by default) offers: cleaned for
    *repository* as the checks' PATH is, with the folders the user trusts (:func:`with_trusted`)."""
    env = os.environ if environ is None else environ
    path = checks_path(env.get("PATH", os.defpath), repository, env.get("GIT_EXEC_PATH"))
    return Offers(with_trusted(path))
