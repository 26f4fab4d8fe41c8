"""The main thread's signal handlers held off while a child process starts: :class:`Held`.

Python runs a signal handler (Ctrl-C's ``KeyboardInterrupt``) in the main thread between any
two bytecodes, so one can raise after the child started but before the code that would kill it
knows its pid (right after ``fork`` or ``posix_spawn`` returned, before the pid is stored). The
child then runs on with nobody to kill it: under load the parent may not run again until the
child has long started, and a Ctrl-C sent meanwhile lands exactly there. Both ways gitaudit
starts a process hold the handlers from before the start until the pid is kept where an
exception kills the child (:func:`gitaudit.checks.process.run_bounded` for a check's process
group, :class:`gitaudit.git.spawn.Process` for git), then release them: what arrived meanwhile
is handled there.

Standard library only, and light: :mod:`gitaudit.git.spawn` is on the hooks' fast path. It
reads the handlers through ``_signal`` (``signal.py`` wraps every number in an enum: about 2 ms
to import, and ~270 us for the ~60 signals a hold looks at), and looks for the main thread only
when ``threading`` was imported (no other thread exists without it).
"""

from __future__ import annotations

import sys

try:  # signal's C half: the same functions on plain numbers
    import _signal as signals  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - not CPython
    import signal as signals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    _Handler = Callable[[int, FrameType | None], object]


class Held:
    """The main thread's Python signal handlers, held off while a child starts (see the module
    docstring): each is replaced by one that only notes the signal, until :meth:`release` puts
    them back and raises what was noted, which runs them as if the signals arrived then.

    Only handlers that are Python callables are held: ``SIG_DFL``, ``SIG_IGN`` and handlers
    installed from C never raise in Python. Other threads run no Python handler, so there this
    holds nothing (a run's workers start its checks, the fingerprint's thread starts git: no
    cost there).
    """

    __slots__ = ("_noted", "_previous")

    def __init__(self) -> None:
        self._previous: dict[int, _Handler] = {}
        self._noted: list[int] = []

    def __enter__(self) -> Held:
        threading = sys.modules.get("threading")
        if threading is not None and threading.current_thread() is not threading.main_thread():
            return self
        try:
            for signum in signals.valid_signals():
                handler = signals.getsignal(signum)
                if callable(handler):
                    self._previous[signum] = handler
                    signals.signal(signum, self._note)
        except BaseException:  # a signal not held yet raised: no child has started
            self.release()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        self._noted.append(signum)

    def release(self) -> None:
        """Put the handlers back, then raise the signals noted meanwhile (once each, as the
        kernel merges a signal that is already pending): the first handler that raises ends
        this, as it would have ended the code it interrupted. Does nothing the second time."""
        previous, self._previous = self._previous, {}
        try:
            for signum in list(previous):
                signals.signal(signum, previous[signum])
                del previous[signum]
        finally:  # a signal whose handler was put back raised: put back the rest too
            for signum, handler in previous.items():
                signals.signal(signum, handler)
        noted, self._noted = dict.fromkeys(self._noted), []
        for signum in noted:
            signals.raise_signal(signum)  # its handler runs before this returns
