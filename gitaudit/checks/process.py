"""The one bounded subprocess helper every check goes through (Linux/POSIX).

A check's outcome becomes signed evidence, so *how* a check runs must be uniform: the same stdin,
the same process-group discipline, the same limits, and the same way of reporting failures to
start. Every check therefore runs through :func:`run_bounded`, which bounds three things:

* **Time.** The timeout is measured from just before the process starts. When it expires the
  whole process group is killed with ``SIGKILL`` and the result says ``timed_out``.
* **Output.** Both pipes are read concurrently with one ``poll()`` loop (no threads: thread start
  costs more than the process itself for short checks). The first ``max_output_bytes`` of each
  stream are kept as raw bytes; the rest is counted and discarded, so a check that prints 1 GB
  neither blocks on a full pipe nor exhausts memory.
* **Processes.** The check starts in a new session (``start_new_session=True``), so it and its
  descendants form one process group that gitaudit can kill as a unit: on timeout, on
  ``KeyboardInterrupt`` (the terminal's Ctrl-C does not reach a new session, so gitaudit must do
  it), and when the check exits but leaves members behind (``sleep 100 &``, a double fork without
  ``setsid()``), which would otherwise outlive the run and keep writing or holding locks.

A Python signal handler (Ctrl-C's ``KeyboardInterrupt``) runs in the main thread between any two
bytecodes. Raised after ``fork`` but before the code that kills the group knows it (inside
``subprocess.Popen``, which then drops the pid, or before the poll loop's ``try``), it left the
check and its group running with nobody to kill them: under load the parent may not run again
until the check has long started. So while a check starts, the main thread's handlers are held
(:class:`~gitaudit.held.Held`) and what arrived meanwhile is handled once the group can be killed.

The check's file mode creation mask is ``022`` (:data:`UMASK`), not gitaudit's: the caller's
(``umask 077; git audit run``) made the files a check creates private, which the tree does not
pin (a test that a secret is written ``0600`` passed for code that never sets the mode). Likewise
every signal starts at its default action and unblocked (:func:`_signals_reset`): an ignored
signal stays ignored across ``exec`` and ``subprocess`` restores only ``SIGPIPE`` and
``SIGXFSZ``, so the caller's ``trap '' HUP TERM`` (or ``nohup``) kept alive a check that the
user's run sees killed (a test that a daemon survives a hangup passed for code with no handler).

Failures to start (missing command, missing execute permission, no ``#!`` line, missing working
directory) are reported in :attr:`ProcessResult.start_error` and never raised: the check fails
with that message. Misuse by the caller (a string where an argument list is required, NUL bytes,
a non-positive timeout) raises :class:`~gitaudit.errors.CheckError`.

Limitations (documented rather than handled; cgroups are out of scope):

* A descendant that calls ``setsid()`` or ``setpgid()`` leaves the group and is not killed here
  (a run adopts and kills it once orphaned: :mod:`gitaudit.checks.orphans`). If it
  keeps stdout/stderr open, reading stops :data:`DRAIN_GRACE` seconds after the check exits or is
  killed, so the run still ends, but the escaped process survives.
* A group member running a set-user-ID program as another user cannot be signalled (``EPERM``).
* A process stuck in uninterruptible sleep (``D`` state, e.g. a dead NFS mount) cannot be reaped
  until the kernel lets it go; waiting for it then blocks.
* After a normal exit the leader is reaped *before* its group is probed and killed (a zombie
  leader would make the group look non-empty). A group id cannot be reused while any member
  lives; if the group is empty, hitting an unrelated group would require the kernel to hand out
  the same pid to a new group leader within microseconds, i.e. a full wrap of the pid space.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from gitaudit.checks.fence import Fence
from gitaudit.errors import CheckError
from gitaudit.frozen import frozen
from gitaudit.held import Held
from gitaudit.secret import keep_private

SHELL = "/bin/sh"
"""The shell used for ``shell=True``: POSIX ``sh``, never the user's login shell."""

_RUNNING: set[int] = set()  # the leaders of the checks started and not reaped yet
_RUNNING_LOCK = threading.Lock()


def running() -> set[int]:
    """The pids of the check processes of this process that are started and not reaped yet."""
    with _RUNNING_LOCK:
        return set(_RUNNING)


DRAIN_GRACE = 1.0
"""Seconds to keep reading the pipes after the check exited or was killed.

Normally the pipes reach end-of-file at once; this only matters when a process that escaped the
group still holds them open.
"""

_READ_CHUNK = 1 << 16  # the default Linux pipe capacity: one read empties a full pipe
_POLL_INTERVAL = 0.02  # only used where pidfd_open() is unavailable


@frozen
class ProcessResult:
    """Everything observable about one bounded run, as plain data (ready to be recorded).

    ``exit_code`` is ``None`` whenever the process did not exit by itself: it could not start
    (``start_error``), it timed out (``timed_out``), or it died from a signal (``signal``).
    ``stdout``/``stderr`` hold the *first* ``max_output_bytes`` bytes of each stream, unchanged;
    ``*_total`` counts every byte produced, including the discarded ones.
    """

    argv: tuple[str, ...]
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration: float
    start_error: str | None
    leftovers_killed: bool

    @property
    def succeeded(self) -> bool:
        """True when the process started, finished in time and exited with status 0."""
        return self.start_error is None and not self.timed_out and self.exit_code == 0

    def summary(self) -> str:
        """One line for humans: how the process ended."""
        if self.start_error is not None:
            return self.start_error
        if self.timed_out:
            text = f"timed out after {self.duration:.1f}s (process group killed)"
        elif self.signal is not None:
            text = f"killed by signal {self.signal} ({_signal_name(self.signal)})"
        else:
            text = f"exit code {self.exit_code}"
        if self.leftovers_killed:
            text += "; left processes running, which were killed"
        return text


def decode_output(data: bytes) -> str:
    """Decode captured output for display only: UTF-8, invalid bytes shown as ``\\xNN`` escapes.

    Evidence keeps the raw bytes; this never fails and never hides that bytes were not UTF-8.
    """
    return data.decode("utf-8", errors="backslashreplace")


UMASK = 0o022  # every check's file mode creation mask, whoever starts the run


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    max_output_bytes: int = 1 << 20,
    shell: bool = False,
    on_start: Callable[[int], None] | None = None,
    fence: Fence | None = None,
) -> ProcessResult:
    """Run one check process with bounded time, output and process lifetime.

    ``argv`` is executed directly (no shell, so metacharacters are plain text) unless ``shell`` is
    true, in which case ``argv`` must be one command string (or a one-element sequence) and runs as
    ``/bin/sh -c CMD``. stdin is ``/dev/null``; ``env`` is used exactly as given (``None``
    inherits gitaudit's environment). Returns a :class:`ProcessResult`; raises
    :class:`CheckError` only for caller mistakes, and re-raises ``KeyboardInterrupt`` after killing
    the process group. ``on_start`` receives the pid (which is also the process group id) as soon
    as the process exists, so a supervisor in another thread can kill the group on Ctrl-C.
    ``fence`` (:mod:`gitaudit.checks.fence`) names what the process may not open.
    """
    command = _command(argv, shell)
    if not timeout > 0:  # also rejects NaN
        raise CheckError(
            f"timeout must be a positive number of seconds, got {timeout!r}",
            hint="declare a timeout greater than zero",
        )
    if max_output_bytes < 0:
        raise CheckError(
            f"max_output_bytes must not be negative, got {max_output_bytes!r}",
            hint="use 0 to keep no output at all",
        )
    keep_private()  # the check may signal this process: its memory must not reach a core file
    start = time.monotonic()
    if not os.path.isdir(cwd):
        return _not_started(command, f"working directory not found: {cwd}", start)

    child = _chain(_signals_reset(), fence.child() if fence is not None else None)

    def begin() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            umask=UMASK,  # not the caller's: see the module docstring
            preexec_fn=child,  # noqa: PLW1509 (system calls only: see Fence.child)
        )

    # released at the latest when the block ends; normally inside _supervise's try, where a
    # KeyboardInterrupt that arrived while the check started kills its group
    with Held() as held:
        try:
            proc = fence.start(begin) if fence is not None else begin()
        except OSError as exc:
            return _not_started(command, _start_error_message(exc, command, cwd, env), start)
        except subprocess.SubprocessError:  # only *child* raises in the new process
            message = (
                "its process could not reset its signals or enter its own Landlock domain "
                "(scoped signals)"
            )
            return _not_started(command, message, start)
        except ValueError as exc:  # e.g. an environment variable name containing '=' or NUL
            raise CheckError(
                f"cannot start {command[0]!r}: {exc}",
                hint="check the environment declared for this check",
            ) from exc
        with _RUNNING_LOCK:
            _RUNNING.add(proc.pid)
        try:
            return _supervise(proc, command, start, timeout, max_output_bytes, on_start, held)
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc.pid)


# not to reset: those no process can ignore, and those Python ignores itself, which subprocess
# restores (``restore_signals``)
_LEFT = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ})
_EMPTY_SET = ctypes.create_string_buffer(128)  # a sigset_t with no signal in it


def _signals_reset() -> Callable[[], None] | None:
    """What a check's process runs before its program when the caller ignored or blocked a
    signal: each back at its default action, none blocked (see the module docstring); None
    when there is nothing to undo (then no ``preexec_fn`` slows the start). Only system calls
    through functions looked up here, as in :meth:`Fence.child`."""
    ignored = [
        s
        for s in signal.valid_signals()
        if s not in _LEFT and signal.getsignal(s) is signal.SIG_IGN
    ]
    blocked = bool(signal.pthread_sigmask(signal.SIG_BLOCK, ()))
    if not ignored and not blocked:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    reset, setmask = libc.signal, libc.sigprocmask
    reset.restype = ctypes.c_void_p
    numbers = [int(s) for s in ignored]
    empty = _EMPTY_SET

    def defaults() -> None:
        for number in numbers:
            reset(number, None)  # SIG_DFL
        if setmask(2, empty, None):  # SIG_SETMASK
            raise OSError("sigprocmask")

    return defaults


def _chain(*steps: Callable[[], None] | None) -> Callable[[], None] | None:
    """One ``preexec_fn`` running *steps* (those not None) in order; None when there are none."""
    todo = [s for s in steps if s is not None]
    if len(todo) <= 1:
        return todo[0] if todo else None

    def both() -> None:
        for each in todo:
            each()

    return both


class _Capture:
    """The kept prefix of one stream plus a count of every byte seen."""

    __slots__ = ("buf", "limit", "total")

    def __init__(self, limit: int) -> None:
        self.buf = bytearray()
        self.limit = limit
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.buf)
        if room > 0:
            self.buf += chunk[:room]


def _supervise(  # noqa: C901, PLR0912, PLR0915 (one state machine: pump, then clean up)
    proc: subprocess.Popen[bytes],
    command: tuple[str, ...],
    start: float,
    timeout: float,
    limit: int,
    on_start: Callable[[int], None] | None,
    held: Held,
) -> ProcessResult:
    """Pump both pipes until the leader exits or the deadline passes, then clean up the group.

    Called with the signal handlers *held*: nothing can raise before the ``try`` below, whose
    handler kills the group; they are released in it, once ``on_start`` knows the group."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = start + timeout
    pgid = proc.pid  # a new session's leader is also its process group's leader
    out, err = _Capture(limit), _Capture(limit)
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    sel = _new_selector()
    pidfd: int | None = None
    reaped = group_handled = timed_out = leftovers = False
    try:
        if on_start is not None:
            on_start(pgid)
        held.release()  # a KeyboardInterrupt that arrived while the check started: raised here
        for fd in captures:
            sel.register(fd, selectors.EVENT_READ)
        pidfd = _open_pidfd(proc.pid)
        if pidfd is not None:
            # Readable once the leader exits, even while a leftover holds the pipes open.
            sel.register(pidfd, selectors.EVENT_READ)

        exited = False
        while not exited:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                exited = proc.poll() is not None  # it may have exited right at the deadline
                break
            if pidfd is None:
                if proc.poll() is not None:
                    exited = True
                    break
                if not sel.get_map():  # both pipes closed: just wait for the exit
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(remaining)
                    continue
                remaining = min(remaining, _POLL_INTERVAL)
            for key, _ in sel.select(remaining):
                if key.fd == pidfd:
                    exited = True
                else:
                    _read(sel, key.fd, captures)

        if exited:
            # Reap first: a zombie leader would make the group look non-empty forever.
            proc.wait()
            reaped = True
            leftovers = _kill_leftovers(pgid)
            group_handled = True
        else:
            timed_out = True
            _killpg(pgid)  # the unreaped leader pins the group id: no reuse race here
            group_handled = True
            proc.wait()
            reaped = True

        if pidfd is not None:
            sel.unregister(pidfd)
        drain_deadline = time.monotonic() + DRAIN_GRACE
        while sel.get_map():
            remaining = drain_deadline - time.monotonic()
            if remaining <= 0:
                break  # something outside the group holds the pipes; stop reading
            for key, _ in sel.select(remaining):
                _read(sel, key.fd, captures)
    except BaseException:
        # KeyboardInterrupt (or anything else): never leave the check running behind us.
        if not group_handled:
            _killpg(pgid)
        if not reaped:
            proc.wait()
        raise
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        proc.stdout.close()
        proc.stderr.close()

    returncode = proc.returncode
    killed_by = -returncode if returncode < 0 else None
    return ProcessResult(
        argv=command,
        exit_code=None if timed_out or killed_by is not None else returncode,
        signal=killed_by,
        stdout=bytes(out.buf),
        stderr=bytes(err.buf),
        stdout_total=out.total,
        stderr_total=err.total,
        stdout_truncated=out.total > len(out.buf),
        stderr_truncated=err.total > len(err.buf),
        timed_out=timed_out,
        duration=time.monotonic() - start,
        start_error=None,
        leftovers_killed=leftovers,
    )


def _read(sel: selectors.BaseSelector, fd: int, captures: dict[int, _Capture]) -> None:
    chunk = os.read(fd, _READ_CHUNK)
    if chunk:
        captures[fd].feed(chunk)
    else:
        sel.unregister(fd)  # end of file: every writer has closed it


def _new_selector() -> selectors.BaseSelector:
    # poll() needs no extra file descriptor (epoll would cost two syscalls per run).
    if hasattr(selectors, "PollSelector"):
        return selectors.PollSelector()
    return selectors.SelectSelector()  # pragma: no cover - every POSIX we support has poll()


def _open_pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (Linux >= 5.3), or None to fall back to polling ``waitpid``."""
    if sys.platform != "linux":  # pragma: no cover
        return None
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # ENOSYS on old kernels, EPERM under some seccomp filters
        return None


def _killpg(pgid: int) -> bool:
    """SIGKILL the group; True if it had members that could be signalled."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_leftovers(pgid: int) -> bool:
    """After the leader was reaped: kill what is left of its group, report whether anything was.

    The cheap probe (signal 0) settles the common case, an empty group, with one syscall. Only if
    the group is non-empty is ``/proc`` consulted, so that orphaned zombies (exited children still
    waiting for init to reap them) are not reported as leftovers.
    """
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    alive = _group_has_live_members(pgid)
    signalled = _killpg(pgid)
    return signalled and alive


def _group_has_live_members(pgid: int) -> bool:
    """True if ``/proc`` shows a non-zombie process in group ``pgid`` (or cannot tell)."""
    if not os.path.isdir("/proc"):  # pragma: no cover - no procfs: assume the worst
        return True
    return any(
        len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")
        for _pid, fields in processes()
    )


def processes() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the fields of ``/proc/<pid>/stat`` after the command name: state, ppid, pgrp,
    session, ...) of every process there is (none without ``/proc``)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid pgrp session ...": comm may contain spaces and parentheses
        yield int(name), stat.rpartition(b")")[2].split()


def _not_started(command: tuple[str, ...], message: str, start: float) -> ProcessResult:
    return ProcessResult(
        argv=command,
        exit_code=None,
        signal=None,
        stdout=b"",
        stderr=b"",
        stdout_total=0,
        stderr_total=0,
        stdout_truncated=False,
        stderr_truncated=False,
        timed_out=False,
        duration=time.monotonic() - start,
        start_error=message,
        leftovers_killed=False,
    )


def _start_error_message(
    exc: OSError, command: tuple[str, ...], cwd: Path, env: Mapping[str, str] | None
) -> str:
    """Turn an exec failure into the one-line reason the check fails with."""
    prog = command[0]
    if exc.filename is not None and os.fspath(exc.filename) == os.fspath(cwd):
        return f"cannot enter working directory {cwd}: {exc.strerror}"
    if exc.errno == errno.ENOENT:
        # ENOENT also means "the #! interpreter is missing" when the file itself exists.
        if "/" in prog:
            found: str | None = os.path.join(cwd, prog)
        else:
            search = (os.environ if env is None else env).get("PATH", os.defpath)
            found = shutil.which(prog, path=search)
        if found is not None and os.path.isfile(found):
            return f"interpreter not found for {prog} (check its #! line)"
        return f"command not found: {prog}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied: {prog}"
    if exc.errno == errno.ENOEXEC:
        return f"exec format error: {prog} (not a binary and no #! line)"
    return f"cannot start {prog}: {exc.strerror or exc}"


def _command(argv: Sequence[str], shell: bool) -> tuple[str, ...]:
    """Validate ``argv`` against ``shell`` and return the exact argv to execute."""
    if shell:
        if isinstance(argv, str):
            line = argv
        elif len(argv) == 1:
            line = argv[0]
        else:
            raise CheckError(
                f"shell=True needs one command string, got {len(argv)} arguments",
                hint="pass the command line as a single string, or use an argument list "
                "without shell",
            )
        if not isinstance(line, str) or not line.strip():
            raise CheckError(
                f"shell command {line!r} is empty or not a string",
                hint="give the command line to run with /bin/sh -c",
            )
        items: tuple[str, ...] = (SHELL, "-c", line)
    else:
        if isinstance(argv, str):
            raise CheckError(
                f"argv must be a list of arguments, not the string {argv!r}",
                hint="split it into arguments, or run it through /bin/sh with shell=True",
            )
        items = tuple(argv)
        if not items or items[0] == "":
            raise CheckError(
                "argv names no command to run", hint="the first argument is the program"
            )
    for arg in items:
        if not isinstance(arg, str):
            raise CheckError(
                f"argument {arg!r} in {list(items)!r} is not a string",
                hint="every argument must be a string",
            )
        if "\0" in arg:
            raise CheckError(
                f"argument {arg!r} contains a NUL byte",
                hint="arguments cannot contain NUL bytes",
            )
    return items


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
