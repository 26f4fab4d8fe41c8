"""One story for Ctrl-C (SIGINT) during `git audit run`, and for SIGTERM and SIGHUP alike.

SIGTERM is how a CI job is cancelled, how ``timeout`` and a plain ``kill`` stop a process, and
SIGHUP what a closed terminal sends: left to their default action they ended the process with
nothing written, so a failed attempt went uncounted (``max_attempts`` never reached by a run
killed as soon as a step failed) and a non-idempotent step left no unknown outcome to reconcile
(the next run executed it again). So all three are one story, told below for SIGINT; a stop
that arrived before any check ran exits ``128 +`` the signal's number (:func:`exit_status`).
SIGKILL cannot be caught: such a run leaves no record (docs/threat-model.md).

Inside :func:`session` (what the command line opens around a run):

* the **first** SIGINT raises ``KeyboardInterrupt``: before the checks start, nothing is
  recorded. While checks run (inside :func:`polled`), it is only remembered: the scheduler
  (:func:`gitaudit.run.runner.execute`) asks at its safe points (it wakes at least every
  quarter second), kills every check's process group and the run is recorded as
  ``INTERRUPTED``. Raised anywhere, the exception could land between starting a check and
  noting it as running, and that check's interruption would go unreported;
* every **later** SIGINT only prints a line: the run being stopped is still recorded, so a
  double Ctrl-C cannot leave a half-written record or a traceback behind;
* from :func:`hold` to the end of :func:`held` (once the checks are done: the evidence is
  written, the ref moved, the lookup cache synced), even the first SIGINT only prints and is
  remembered: the record is finished, then the command stops (:func:`requested`).

Outside a session (the library called directly, or another thread) both are no-ops and Python's
default ``KeyboardInterrupt`` applies. A signal the process was started with ignored (SIGINT for
a background job of a non-interactive shell, SIGHUP under ``nohup``) stays ignored. Standard
library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a run as Ctrl-C does."""


class _State:
    active = False
    requested = False
    signum = int(signal.SIGINT)  # the first of SIGNALS received (kept after the session)
    shield_depth = 0
    polled_depth = 0


_state = _State()

_STOPPING = (
    "gitaudit: already stopping: the checks are being killed and the run is recorded as "
    "INTERRUPTED; a moment, please\n"
)
_RECORDING = "gitaudit: {}: finishing the record of this run first, then stopping\n"


def _write(text: str) -> None:
    # os.write, not print: a handler may run in the middle of a buffered write to stderr
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.requested:
        _write(_STOPPING)
        return
    _state.requested, _state.signum = True, signum
    if _state.shield_depth:
        _write(_RECORDING.format(cause()))
        return
    if _state.polled_depth:
        return  # the scheduler asks requested() at its next safe point
    raise KeyboardInterrupt


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Apply the policy above until the block ends (main thread only), to each of
    :data:`SIGNALS` the process does not ignore."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    handled = [s for s, was in previous.items() if was is not signal.SIG_IGN]
    if not handled:
        yield
        return
    _state.active, _state.requested, _state.signum = True, False, int(signal.SIGINT)
    _state.shield_depth = _state.polled_depth = 0
    for s in handled:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s in handled:
            signal.signal(s, previous[s])
        _state.active = False


@contextlib.contextmanager
def polled() -> Iterator[None]:
    """Within a session: a first SIGINT during the block is remembered, not raised; the block
    asks :func:`requested` where stopping is safe. One that arrived before the block raises
    here, at its start."""
    if requested() and not _state.shield_depth:
        raise KeyboardInterrupt
    _state.polled_depth += 1
    try:
        yield
    finally:
        _state.polled_depth = max(0, _state.polled_depth - 1)


def hold() -> None:
    """Within a session: from now on a SIGINT does not interrupt (it is remembered), until the
    :func:`held` block ends (or the session does)."""
    _state.shield_depth += 1


@contextlib.contextmanager
def held() -> Iterator[None]:
    """The last block of a :func:`hold`: the hold is released when it ends, however it ends."""
    try:
        yield
    finally:
        _state.shield_depth = max(0, _state.shield_depth - 1)


def requested() -> bool:
    """Whether a SIGINT (or SIGTERM, SIGHUP) arrived during the current session."""
    return _state.active and _state.requested


def cause() -> str:
    """What stopped the run, as the messages and the record name it: ``Ctrl-C`` for SIGINT,
    else the signal's name (the last session's first signal)."""
    if _state.signum == signal.SIGINT:
        return "Ctrl-C"
    return signal.Signals(_state.signum).name


def exit_status() -> int:
    """The exit status of a command that signal stopped before it recorded anything: 128 + its
    number, as a shell reports a process the signal ended (130 for Ctrl-C)."""
    return 128 + _state.signum
