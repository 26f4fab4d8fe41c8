"""One story for Ctrl-C (SIGINT) during `git audit run`.

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
default ``KeyboardInterrupt`` applies. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class _State:
    active = False
    requested = False
    shield_depth = 0
    polled_depth = 0


_state = _State()

_STOPPING = (
    "gitaudit: already stopping: the checks are being killed and the run is recorded as "
    "INTERRUPTED; a moment, please\n"
)
_RECORDING = "gitaudit: Ctrl-C: finishing the record of this run first, then stopping\n"


def _write(text: str) -> None:
    # os.write, not print: a handler may run in the middle of a buffered write to stderr
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.requested:
        _write(_STOPPING)
        return
    _state.requested = True
    if _state.shield_depth:
        _write(_RECORDING)
        return
    if _state.polled_depth:
        return  # the scheduler asks requested() at its next safe point
    raise KeyboardInterrupt


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Apply the policy above until the block ends (main thread only, and only when SIGINT is
    not ignored, as it is for a background job of a non-interactive shell)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return
    _state.active, _state.requested = True, False
    _state.shield_depth = _state.polled_depth = 0
    signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
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
    """Whether a SIGINT arrived during the current session."""
    return _state.active and _state.requested
