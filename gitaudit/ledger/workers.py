"""The worker processes ``git audit verify`` shares a long runs chain with, started early.

:mod:`gitaudit.ledger.verify` verifies a long chain in this process and in one worker per
further core (:func:`jobs`): fresh interpreters running :func:`gitaudit.ledger.run_shares.worker`,
which reads its setup on stdin and does nothing before. A worker's interpreter takes 60-80 ms
to import what it needs; started once the walk of the chain shows it is long, that second core
waits for it. When there is no verified mark yet (the first ``verify`` of a clone, or after the
marks were removed: every commit is to be verified), the command's entry starts the workers
before gitaudit's own imports (:func:`start_early`), so their start-up overlaps this process's
(from scratch on 20,000 runs, the second core starts on its first share about 70 ms sooner). A
worker nobody takes is ended at exit. Standard library only: it runs before anything else.
"""

from __future__ import annotations

import os
import subprocess
import sys

TYPE_CHECKING = False  # not typing's: this module is imported first, and alone
if TYPE_CHECKING:
    from typing import TypeAlias

    Worker: TypeAlias = subprocess.Popen[bytes]

_CODE = (
    "from gitaudit.git.libgit2 import install; install(); "
    "from gitaudit.ledger.run_shares import worker; worker()"
)

_EARLY: list[Worker] = []  # started by start_early, not taken yet


def jobs() -> int:
    """Processes verifying at once (this one included): one per core, at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, 8))


def spawn(count: int) -> list[Worker]:
    """*count* new worker processes, each waiting for its setup line."""
    import gitaudit

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gitaudit.__file__)))
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return [
        subprocess.Popen(
            # -P: `-c` would put the current folder (the work tree, anything may be there)
            # before the package root on the worker's path
            [sys.executable, "-P", "-c", _CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        for _ in range(count)
    ]


def take(count: int) -> list[Worker]:
    """*count* workers: those started early first, then new ones."""
    taken = _EARLY[:count]
    del _EARLY[:count]
    return taken + spawn(count - len(taken))


def started_early() -> bool:
    """Whether workers started early are waiting to be taken."""
    return bool(_EARLY)


def start_early(start: str) -> None:
    """Start the workers now when ``verify`` in the work tree at or above *start* has every
    commit to verify (no verified mark at all) and more than one core to do it with. A guess
    from the files alone (a linked worktree or a bare repository is not guessed at): a wrong
    one costs a worker's start-up, never a different verification."""
    from gitaudit.places import entered_worktree, shared_state_dir

    count = jobs() - 1
    if count < 1 or _EARLY:
        return
    try:
        work_tree = entered_worktree(start)
        if work_tree is None:
            return
        gitdir = os.path.join(work_tree, ".git")
        if not os.path.isdir(gitdir) or os.path.lexists(
            os.path.join(shared_state_dir(gitdir), "watermarks.json")
        ):
            return
    except (OSError, ValueError):  # .git/commondir not UTF-8, a NUL in it: the command says so
        return
    _EARLY.extend(spawn(count))
    import atexit

    atexit.register(end_unused)


def end(workers: list[Worker]) -> None:
    """End each of *workers* (an idle one waits for its next line) and reap it."""
    import contextlib

    for proc in workers:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def end_unused() -> None:
    """End the workers started early that nobody took."""
    unused = _EARLY[:]
    _EARLY.clear()
    end(unused)
