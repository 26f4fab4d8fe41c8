"""What a run's checks leave running in sessions of their own: adopted, then killed.

A check runs in a process group of its own, killed as a unit when the check ends
(:mod:`gitaudit.checks.process`). A descendant that calls ``setsid()`` leaves that group and used
to outlive the run, free to write the private checkout after the purity check had found it equal
to the tree: the next run took the checkout for clean and its checks read what the daemon wrote.

Linux lets a process adopt the orphans of its descendants (``PR_SET_CHILD_SUBREAPER``). While a
run's checks execute (:func:`adopting`), gitaudit is such a subreaper: a daemon whose parent
exits, or is killed with its check's group, becomes gitaudit's child instead of init's. When the
checks are done, before anything looks at the checkout, every adopted process (a child of this
process in a session other than its own, which is not a check still running) is killed with
``SIGKILL``, and with it, in the same round, every process it started and they started in
turn, however deep (a chain of daemons, each in a session of its own, was adopted one level a
round and outlived the rounds); then they are reaped, round after round, until none is left:
what was started between the look at ``/proc`` and the kill is adopted and killed in the next.

Limits: a process that is not orphaned (its parent, outside the run, lives on), or that another
service starts (``at``, ``systemd-run``, a container), is not a descendant and is not reached;
without ``prctl`` (not Linux) nothing is adopted and a ``setsid()`` daemon still escapes. Checks
are bounded, not sandboxed (docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

from gitaudit.checks.process import processes

PR_SET_CHILD_SUBREAPER = 36
ROUNDS = 64  # kill-and-reap rounds: each one reaches what was started since the last
REAP_WAIT = 2.0  # seconds to wait for one killed process to be reaped (D state: give up)


class _Runs:
    """How many runs of this process have checks executing (in-process runs may overlap)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0


_RUNS = _Runs()


def _prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.prctl
    except (OSError, AttributeError):
        return None

    def prctl(option: int, value: int) -> int:
        return int(call(option, value, 0, 0, 0))

    return prctl


def _subreaper(on: bool) -> bool:
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, int(on)) == 0


@contextlib.contextmanager
def adopting(running: Callable[[], set[int]]) -> Iterator[None]:
    """While the block runs, adopt what the checks orphan; when it ends, kill and reap every
    adopted process but the checks *running* names (those of other in-process runs)."""
    with _RUNS.lock:
        _RUNS.count += 1
        if _RUNS.count == 1:
            _subreaper(True)
    try:
        yield
    finally:
        kill_adopted(running())
        with _RUNS.lock:
            _RUNS.count -= 1
            if _RUNS.count == 0:
                _subreaper(False)


def kill_adopted(keep: set[int]) -> int:
    """Kill and reap this process's adopted children (a session of their own, not in *keep*);
    the number killed."""
    me, session = os.getpid(), os.getsid(0)
    killed = 0
    for _ in range(ROUNDS):
        table = _table()
        found = [
            pid
            for pid, (parent, sid) in table.items()
            if parent == me and sid != session and pid not in keep
        ]
        if not found:
            break
        doomed = _descendants(found, table)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in found:
            _reap(pid)
        killed += len(found)
    return killed


def _reap(pid: int) -> None:
    deadline = time.monotonic() + REAP_WAIT
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not ours after all, or reaped already
        if done or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def _table() -> dict[int, tuple[int, int]]:
    """pid: (parent, session) of every process there is (zombies included)."""
    return {pid: (int(f[1]), int(f[3])) for pid, f in processes() if len(f) >= 4}


def _descendants(roots: list[int], table: dict[int, tuple[int, int]]) -> list[int]:
    """*roots* and every process below them in *table*, at any depth."""
    below: dict[int, list[int]] = {}
    for pid, (parent, _sid) in table.items():
        below.setdefault(parent, []).append(pid)
    out, todo, seen = [], list(roots), set(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        for child in below.get(pid, ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return out
