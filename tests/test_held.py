"""``gitaudit.held.Held``: the main thread's signal handlers held off while a child starts, and
what arrived meanwhile handled afterwards, by the handlers that were in place."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gitaudit.held import Held

ROOT = Path(__file__).resolve().parents[1]


def test_a_signal_noted_while_held_reaches_its_handler_once_afterwards() -> None:
    """Sent twice while held, SIGUSR1 reaches its own handler once on release (the kernel
    merges a signal already pending too), and the handler is back in place."""
    seen: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with Held():
            os.kill(os.getpid(), signal.SIGUSR1)
            os.kill(os.getpid(), signal.SIGUSR1)
            assert seen == []
            assert signal.getsignal(signal.SIGUSR1) is not handler
        assert seen == [signal.SIGUSR1]
        assert signal.getsignal(signal.SIGUSR1) is handler
    finally:
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.usefixtures("sigint_delivered")
def test_a_ctrl_c_held_is_raised_on_release_with_every_handler_back() -> None:
    """The KeyboardInterrupt of a Ctrl-C held is raised by release, where the caller can kill
    what it started; a handler that is not Python's (ignored, the default) is left alone."""
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        held = Held()
        with held:
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            with pytest.raises(KeyboardInterrupt):
                held.release()
            held.release()  # nothing the second time
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, previous)


@pytest.mark.usefixtures("sigint_delivered")
def test_a_worker_thread_holds_nothing() -> None:
    """Only the main thread runs Python handlers, and only it may install them: in a worker
    (the fingerprint's thread starting git) a hold leaves them as they are."""
    seen: list[object] = []

    def work() -> None:
        try:
            with Held():
                seen.append(signal.getsignal(signal.SIGINT))
        except BaseException as exc:  # what the worker met, told by the assert
            seen.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert seen == [signal.default_int_handler]


def test_holding_imports_neither_signal_nor_threading() -> None:
    """The hooks' fast path starts git through a hold: no ``signal`` (its enums, about 2 ms),
    no ``threading`` (a process without it has no other thread to ask about)."""
    code = (
        "import sys, gitaudit.held\n"
        "with gitaudit.held.Held(): pass\n"
        "print(sorted(m for m in ('signal', 'threading', 'enum', 'typing') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert done.stdout == "[]\n"
