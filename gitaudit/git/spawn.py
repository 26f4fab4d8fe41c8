"""Starting a process with ``os.posix_spawn``: the one primitive every git process goes through.

The gate, the hooks and the workspace fingerprint start a few git processes each call, and the
``subprocess`` module costs about 6 ms of imports (``locale``, ``signal``, ``threading``,
``selectors``) before the first can start. This module needs ``os`` and ``select`` only, so the
fingerprint's ``git add -A`` starts while the rest of gitaudit is still being imported
(:mod:`gitaudit.git.head_start`).

What a child gets, as from ``subprocess`` with its defaults: the environment given, standard
input from ``/dev/null`` or a pipe fed the bytes given, standard output and error to pipes, to
``/dev/null`` or to files the caller opened, ``SIGPIPE`` and ``SIGXFSZ`` back to their default
action (Python ignores ``SIGPIPE``, and an ignored signal stays ignored across ``exec``), and no
other descriptor: Python opens every file non-inheritable, and the inheritable ones this
process was given (by whatever started gitaudit) are closed in the child. The working directory
is the caller's (git's ``-C`` chooses another). POSIX only, like the rest of gitaudit.

A Ctrl-C (or any signal whose Python handler raises) that lands right after the child started,
before its pid is kept, would leave it running with nobody to kill it: the handlers are held
while it starts (:class:`~gitaudit.held.Held`), and what arrived meanwhile is raised once the
child can be killed, which it then is. After :class:`Process` returns, killing the child on an
exception is the caller's: a ``with`` block does it. A Ctrl-C can still land between the two
(as :class:`Process` returns, or as the block begins: seen under load), so a caller that kills
its child on Ctrl-C holds the handlers around both too, released first thing in the block
(``with Held() as held, Process(...)``: :func:`gitaudit.git.call.run_git`, the head start).
"""

from __future__ import annotations

import contextlib
import os

from gitaudit.held import Held

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

PIPE = -1
"""Connect the child's stream to a pipe this process reads (or feeds)."""
DEVNULL = -2
"""Connect the child's stream to ``/dev/null``."""

_CHUNK = 1 << 16
_RESET_SIGNALS = ("SIGPIPE", "SIGXFSZ")


def executable(name: str, env: Mapping[str, str]) -> str:
    """The file ``exec`` runs for *name*, searched on *env*'s ``PATH`` (as ``subprocess``
    does: not this process's); FileNotFoundError when there is none."""
    if os.sep in name:
        return name
    for folder in os.get_exec_path(env):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"{name}: not found on PATH")


def inheritable() -> list[int]:
    """The descriptors above 2 a child would inherit: what started this process passed it (a
    hook's host, a test runner), never a file Python opened."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found = []
        for name in names:
            fd = int(name)
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
                if fd > 2 and os.get_inheritable(fd):
                    found.append(fd)
        return found
    return []


class Process:
    """A child process started with ``os.posix_spawn``: ``communicate``, ``wait`` and ``kill``
    as on ``subprocess.Popen``, and a context manager that closes its pipes and reaps it,
    killing it first when the block raised (Ctrl-C, say: as ``subprocess.run`` does, never
    wait for a child that may not end)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        input: bytes | None = None,
        stdout: int = PIPE,
        stderr: int = PIPE,
    ) -> None:
        """Start *argv* with *env*. *input*: bytes fed to its standard input (None:
        ``/dev/null``). *stdout*, *stderr*: :data:`PIPE`, :data:`DEVNULL` or an open file
        descriptor (the child gets a copy; the caller keeps and closes its own)."""
        try:  # signal's C half: the same numbers, without the IntEnums signal.py makes of them
            # (enum costs about 2 ms, before the fingerprint's head start can start git)
            import _signal as signals  # type: ignore[import-not-found]
        except ImportError:  # not CPython
            import signal as signals

        path = executable(argv[0], env)
        self.returncode: int | None = None
        self._input = memoryview(input if input is not None else b"")
        # this process's ends of the pipes: [stdin, stdout, stderr], None when not a pipe
        self._pipes: list[int | None] = [None, None, None]
        actions: list[tuple[object, ...]] = []
        theirs: list[int] = []  # the child's ends, closed here once it has them
        with Held() as held:  # until the child can be killed: see the module docstring
            try:
                if input is None:
                    actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
                else:
                    child, self._pipes[0] = os.pipe()
                    theirs.append(child)
                    actions.append((os.POSIX_SPAWN_DUP2, child, 0))
                for target, how in ((1, stdout), (2, stderr)):
                    if how == DEVNULL:
                        actions.append((os.POSIX_SPAWN_OPEN, target, os.devnull, os.O_WRONLY, 0))
                    elif how == PIPE:
                        self._pipes[target], child = os.pipe()
                        theirs.append(child)
                        actions.append((os.POSIX_SPAWN_DUP2, child, target))
                    else:
                        actions.append((os.POSIX_SPAWN_DUP2, how, target))
                actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in inheritable() if fd not in theirs]
                reset = [getattr(signals, n) for n in _RESET_SIGNALS if hasattr(signals, n)]
                self.pid = os.posix_spawn(
                    path, list(argv), dict(env), file_actions=actions, setsigdef=reset
                )
            except BaseException:
                self._close(0, 1, 2)
                raise
            finally:
                for fd in theirs:
                    os.close(fd)
            try:
                held.release()  # a Ctrl-C that arrived while the child started: raised here
            except BaseException:
                self.kill()
                self._close(0, 1, 2)
                self.wait()
                raise

    def communicate(self) -> tuple[bytes, bytes]:
        """Feed the input, read the piped output to its end and wait for the child: (standard
        output, standard error), empty for a stream not piped."""
        import select

        chunks: dict[int, list[bytes]] = {1: [], 2: []}
        poller = select.poll()
        stream_of: dict[int, int] = {}
        for stream, fd in enumerate(self._pipes):
            if fd is not None:
                stream_of[fd] = stream
                poller.register(fd, select.POLLOUT if stream == 0 else select.POLLIN)
                if stream == 0:
                    os.set_blocking(fd, False)
        while stream_of:
            for fd, _event in poller.poll():
                stream = stream_of[fd]
                if stream == 0:
                    if self._write_some(fd):
                        continue
                elif chunk := os.read(fd, _CHUNK):
                    chunks[stream].append(chunk)
                    continue
                poller.unregister(fd)
                del stream_of[fd]
                self._close(stream)
        self.wait()
        return b"".join(chunks[1]), b"".join(chunks[2])

    def _write_some(self, fd: int) -> bool:
        """Write what the pipe takes of the input; False once it is all written (or the child
        closed its end: like ``subprocess``, a child that stops reading is not an error)."""
        try:
            written = os.write(fd, self._input[:_CHUNK])
        except BlockingIOError:
            return True
        except BrokenPipeError:
            return False
        self._input = self._input[written:]
        return len(self._input) > 0

    def wait(self) -> int:
        """Reap the child; its exit code (minus the signal number when a signal ended it)."""
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        """Send the child ``SIGKILL`` unless it was reaped already."""
        if self.returncode is None:
            import signal

            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def _close(self, *streams: int) -> None:
        for stream in streams:
            fd, self._pipes[stream] = self._pipes[stream], None
            if fd is not None:
                os.close(fd)

    def __enter__(self) -> Process:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self._close(0, 1, 2)
            self.wait()
            return
        self.kill()
        self._close(0, 1, 2)
        # a Ctrl-C that landed as wait's waitpid returned: reaped, its status never kept
        with contextlib.suppress(ChildProcessError):
            self.wait()
