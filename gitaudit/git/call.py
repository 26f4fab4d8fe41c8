"""Running git: :func:`run_git` and :func:`start_git`, the one way gitaudit starts git.

Every git process runs with the one environment policy of :mod:`gitaudit.git.environment`,
started by :mod:`gitaudit.git.spawn` (``os.posix_spawn``: no ``subprocess`` import on the hooks'
fast path), in the folder given (git's ``-C``). A failure names the command line:
:class:`GitCommandError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from gitaudit.errors import RepositoryError
from gitaudit.executables import git_program
from gitaudit.git.environment import CONFIG, git_env
from gitaudit.git.spawn import DEVNULL, PIPE, Process
from gitaudit.held import Held


class GitCommandError(RepositoryError):
    """A git command failed; the message names it."""


class GitResult:
    """What one git process did (a plain class, not a dataclass or a NamedTuple: the
    fingerprint's head start runs git before ``typing`` is imported, about 6 ms)."""

    __slots__ = ("argv", "code", "stderr", "stdout")

    def __init__(self, argv: tuple[str, ...], code: int, stdout: bytes, stderr: bytes) -> None:
        self.argv = argv
        self.code = code
        self.stdout = stdout
        self.stderr = stderr

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape")

    @property
    def err(self) -> str:
        """git's messages on one line, without the ``fatal:``/``error:`` prefixes."""
        text = self.stderr.decode("utf-8", "replace").strip()
        lines = [ln.removeprefix("fatal: ").removeprefix("error: ") for ln in text.splitlines()]
        return "; ".join(ln for ln in lines if ln) or f"git exited with {self.code}"

    def error(self, what: str | None = None, hint: str | None = None) -> GitCommandError:
        command = " ".join(self.argv)
        return GitCommandError(f"{what or command}: {self.err}", hint=hint)


def _argv(args: Sequence[str], git_dir: str | os.PathLike[str] | None) -> list[str]:
    """The command as messages name it (:data:`CONFIG` is added when it is started)."""
    where = [f"--git-dir={os.fspath(git_dir)}"] if git_dir is not None else []
    return ["git", *where, *args]


def _started(
    argv: Sequence[str],
    cwd: str | os.PathLike[str] | None,
    git_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str],
) -> list[str]:
    """The command as started: the ``git`` the repository does not hold
    (:func:`~gitaudit.git.program.git_program`), in *cwd* (git's ``-C``, checked first so that
    a missing folder is named as such), with :data:`CONFIG`."""
    where = None if cwd is None else os.fspath(cwd)
    if where is not None and not os.path.isdir(where):
        raise RepositoryError(f"not a directory: {where}")
    try:
        program = git_program(where if where is not None else git_dir, env)
    except FileNotFoundError as exc:
        message = f"git is not installed or not on PATH: {exc}"
        raise RepositoryError(message, hint="install git, outside the repository") from None
    if where is None:
        return [program, *CONFIG, *argv[1:]]
    return [program, "-C", where, *CONFIG, *argv[1:]]


def _start(
    argv: list[str],
    env: Mapping[str, str],
    *,
    input: bytes | None = None,
    stdout: int = PIPE,
    stderr: int = PIPE,
) -> Process:
    try:
        return Process(argv, env=env, input=input, stdout=stdout, stderr=stderr)
    except FileNotFoundError as exc:
        raise RepositoryError("git is not installed or not on PATH", hint="install git") from exc


def run_git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    git_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    started: Callable[[], object] | None = None,
    transport: bool = False,
) -> GitResult:
    """Run ``git [--git-dir=GIT_DIR] ARGS`` with :func:`~gitaudit.git.environment.git_env`
    (plus *env*) in *cwd*. With *check*, a non-zero exit raises :class:`GitCommandError`
    naming the command. *started* is called once git is running (before its output is
    read). *transport*: git may fetch or push (``sync`` and ``push`` alone; every other git
    process of gitaudit's may not, :data:`~gitaudit.git.environment.NO_TRANSPORT`)."""
    argv, environment = _argv(args, git_dir), git_env(env, transport=transport)
    started_argv = _started(argv, cwd, git_dir, environment)
    # held until the block can kill git: a Ctrl-C as it returns or the block begins kills it too
    with Held() as held, _start(started_argv, environment, input=input) as proc:
        held.release()
        if started is not None:
            started()
        stdout, stderr = proc.communicate()
    result = GitResult(tuple(argv), proc.wait(), stdout, stderr)
    if check and result.code != 0:
        raise result.error()
    return result


def start_git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    git_dir: str | os.PathLike[str] | None = None,
    environment: Mapping[str, str] | None = None,
) -> Process:
    """Start ``git ARGS`` (stdout piped, stderr discarded) to run beside others, with
    *environment* (default :func:`~gitaudit.git.environment.git_env`)."""
    environment = git_env() if environment is None else environment
    started = _started(_argv(args, git_dir), cwd, git_dir, environment)
    return _start(started, environment, stdout=PIPE, stderr=DEVNULL)
