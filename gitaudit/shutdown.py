"""Ending a short command's process without tearing the interpreter down.

A normal exit frees every module and object one by one: 5-10 ms after a gate that took 150, paid
by every ``git audit status``, hook and agent stop. :func:`leave` does what the exit must (the
``atexit`` handlers, such as waiting for a fingerprint nobody took, and flushing the output) and
then ends the process at once. It leaves the normal exit to the interpreter while a non-daemon
thread is still running (the interpreter would wait for it) or a profiler or debugger is
attached (``python -m cProfile`` writes its statistics after the program), and the callers use
it only for the process's own command (a test calling an entry point in-process passes *argv*).

Standard library only, and light: the hooks' fast path imports it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

TYPE_CHECKING = False  # typing costs about 6 ms, and the exit path does without it
if TYPE_CHECKING:
    from typing import NoReturn


def leave(code: int) -> NoReturn:
    """Exit with *code*: at once when nothing but the exit handlers is left to run."""
    # a thread the interpreter waits for is a threading.Thread: none without the module (whose
    # import the hooks' fast path does without, about 1 ms)
    threading = sys.modules.get("threading")
    if threading is not None:
        main = threading.main_thread()
        if any(t is not main and t.is_alive() and not t.daemon for t in threading.enumerate()):
            sys.exit(code)
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler or a debugger writes its findings after the program ends
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe, a closed stream: nothing left to say
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
