"""The console-script entry point of `git audit` (`git-audit`, `gitaudit`, `python -m gitaudit`).

:func:`main` answers the hot read-only commands through :mod:`.fast` without importing typer and
hands everything else to the typer application. Either way, the one exception handler below maps
every expected error to its exit code (0 success/PASS, 1 FAIL/error, 2 usage, 3 UNKNOWN).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs about 6 ms: not before git starts hashing (head_start)
if TYPE_CHECKING:
    from typing import NoReturn

    from gitaudit.errors import GitAuditError


def _sqlite_error(exc: BaseException) -> bool:
    """Whether *exc* is a sqlite3 error (sqlite3 is imported only by what uses it)."""
    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(exc, sqlite3.Error)


def _git_error(exc: BaseException) -> bool:
    """Whether *exc* is libgit2's GitError (pygit2 is imported only by what uses it)."""
    pygit2 = sys.modules.get("pygit2")
    return pygit2 is not None and isinstance(exc, pygit2.GitError)


def _instant(args: list[str]) -> bool:
    """Answer ``--version`` and ``-h`` at interpreter start-up cost: no typer, no pygit2."""
    try:
        return _answer_instantly(args)
    except BrokenPipeError:
        _reader_gone()


def _answer_instantly(args: list[str]) -> bool:
    rest = [a for a in args if a != "--debug"]
    if rest == ["--version"]:
        from gitaudit import __version__

        sys.stdout.write(f"gitaudit {__version__}\n")
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return True
    if rest in (["-h"], ["--help"]):
        from gitaudit.cli import helptext

        if helptext.served():  # exactly what typer would print here
            sys.stdout.write(helptext.TEXT)
            sys.stdout.flush()
            return True
    return False


def _writable_in_any_locale() -> None:
    """Under a locale whose encoding lacks a character gitaudit prints (an arrow, a dash; ASCII
    with ``LC_ALL=C PYTHONUTF8=0``), write it escaped, as stderr does, rather than die with a
    UnicodeEncodeError."""
    stdout = sys.stdout
    encoding = (getattr(stdout, "encoding", None) or "").lower().replace("-", "")
    if encoding != "utf8" and getattr(stdout, "errors", None) in ("strict", "surrogateescape"):
        try:
            stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):  # not a text stream of its own: leave it
            return


def _reader_gone() -> NoReturn:
    """The output's reader exited before it was written (``git audit log | head -1``): stop
    without a word, as git and click do, with exit 1 (not all of the output was read). Later
    writes, the exit's flush included, go to /dev/null."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured output)
        pass
    sys.exit(1)


def _report(exc: GitAuditError) -> NoReturn:
    """Exit with *exc*'s code: `error:` and `hint:` lines, or, for an outcome that is not a
    failure (exit code 0: a change proposed for approvals), the message and the next command."""
    if exc.exit_code == 0:
        print(exc.message)
        if exc.hint:
            print(f"next: {exc.hint}")
        sys.exit(0)
    print(f"error: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"hint: {exc.hint}", file=sys.stderr)
    sys.exit(int(exc.exit_code))


class _Done(Exception):
    """A fast command finished with this exit code; *quick*: nothing of it can still be
    running (a read-only command: not ``run``, whose background work the normal exit lets be)."""

    def __init__(self, code: int, *, quick: bool) -> None:
        super().__init__(code)
        self.code = code
        self.quick = quick


def _dispatch(args: list[str]) -> None:
    """Run the command: the fast path (:mod:`.fast`) when it knows it, else typer's app."""
    words = [a for a in args if a != "--debug"]
    if words in (["status"], ["run"]):
        # the commands agents and loops call most: git starts hashing the work tree before
        # anything else is imported (gitaudit.git.head_start; see gitaudit.cli.fast)
        from gitaudit.git import head_start

        if not head_start.launch("."):
            from gitaudit.git.fingerprint import prefetch

            prefetch(".", head_start_tried=True)
    misuse = None
    # a flag given a value needs two words; the agent hooks (every stop, every tool call) skip
    # this
    if len(args) > 1 and args[:1] != ["agent"]:
        from gitaudit.cli.grammar import misused_flag

        misuse = misused_flag(args)
    if misuse:
        from gitaudit.errors import UsageError

        flag, word = misuse
        raise UsageError(
            f"{flag} is a flag and takes no value ({flag} {word!r} would read {word!r} as "
            "an argument, such as a revision)",
            hint=f"write {flag} alone; a revision named {word!r} goes before the options",
        )
    from gitaudit.cli.fast import try_fast

    code = try_fast(args)
    if code is not None:
        raise _Done(code, quick=words[:1] != ["run"])
    from gitaudit.cli.app import app

    app(args=args, prog_name="git-audit")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``git-audit`` and ``gitaudit``)."""
    args = sys.argv[1:] if argv is None else argv
    _writable_in_any_locale()  # a test's captured output is UTF-8 or has no encoding: kept
    if _instant(args):
        sys.exit(0)
    if argv is None:  # this process is the command: its pygit2 skips the CA bundle
        from gitaudit.git import libgit2

        libgit2.install()
    debug = "--debug" in args or bool(os.environ.get("GITAUDIT_DEBUG"))
    try:
        _dispatch(args)
    except _Done as done:
        if argv is None and done.quick:  # this process's own command: no teardown
            from gitaudit.shutdown import leave

            leave(done.code)
        sys.exit(done.code)
    except KeyboardInterrupt:
        # `run` records an interrupted run itself (gitaudit.run.interrupts); anything else was
        # stopped between atomic steps: refs move by compare-and-swap, after their objects
        fingerprint = sys.modules.get("gitaudit.git.fingerprint")
        if fingerprint is not None:
            fingerprint.drop_prefetch()  # exit now, without waiting for its git
        if debug:
            raise
        # a SIGTERM or SIGHUP inside a run's session is told as Ctrl-C is (its own name, 128 +
        # its number); the module is loaded only by the commands that open one
        interrupts = sys.modules.get("gitaudit.run.interrupts")
        why, code = (
            (interrupts.cause(), interrupts.exit_status()) if interrupts else ("Ctrl-C", 130)
        )
        print(
            f"gitaudit: interrupted ({why}); what the command reported as done is kept, "
            "nothing else was recorded",
            file=sys.stderr,
        )
        sys.exit(code)
    except Exception as exc:
        # the error hierarchy (and enum, which it imports) is imported once something failed:
        # not before git starts hashing (head_start), on the path of every `status`
        from gitaudit.errors import GitAuditError

        if isinstance(exc, GitAuditError):
            if debug and exc.exit_code != 0:
                raise
            _report(exc)
        # a full disk, a read-only file system, a broken cache: one line, never a traceback
        # (objects are written before refs move, so nothing half-recorded is left behind)
        if debug or not (isinstance(exc, OSError) or _sqlite_error(exc) or _git_error(exc)):
            raise
        _failed_outside(exc)


def _failed_outside(exc: Exception) -> NoReturn:
    """Exit 1 for an error of the system (*exc*: an OSError, a sqlite3 error or libgit2's
    GitError) in one line."""
    if isinstance(exc, BrokenPipeError):
        _reader_gone()
    if _git_error(exc):  # an object libgit2 cannot read: a damaged object store
        print(f"error: the repository cannot be read: {exc}", file=sys.stderr)
        print(
            "hint: `git fsck` names what is damaged; restore it from a clone (`git fetch`), "
            "then retry",
            file=sys.stderr,
        )
        sys.exit(1)
    print(f"error: {exc}", file=sys.stderr)
    print(
        "hint: nothing was recorded if the command did not say so; fix the cause and retry",
        file=sys.stderr,
    )
    sys.exit(1)
