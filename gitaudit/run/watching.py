"""Following the work tree for `git audit watch`: one signal per quiet moment after changes.

With the ``watchfiles`` package (the ``watch`` extra: Rust ``notify`` underneath, inotify,
FSEvents or ReadDirectoryChangesW) changes are pushed and debounced by it; without it, or where
it cannot watch, the work tree's fingerprint (:mod:`gitaudit.git.fingerprint`) is polled. Either
way a signal means the fingerprint changed: edits to ignored files or under ``.git`` never
trigger a run, and the fingerprint is also taken every few polls' time, so a change made
before the watch began is not lost. Stopping: set *stop* (or Ctrl-C, which the caller
catches).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from gitaudit.git.fingerprint import workspace_fingerprint

DEBOUNCE = 0.4  # seconds of quiet before a change counts
POLL = 1.0  # seconds between fingerprints without watchfiles


def backend() -> str:
    """``watchfiles`` when it can be imported, else ``polling``."""
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        return "polling"
    return "watchfiles"


def _outside_git(_change: object, path: str) -> bool:
    return "/.git/" not in path.replace("\\", "/") + "/"


def trees(
    workdir: Path,
    stop: threading.Event,
    *,
    debounce: float = DEBOUNCE,
    poll: float = POLL,
    use: str | None = None,
) -> Iterator[str]:
    """The work tree's fingerprint now, then each time it has changed and been quiet for
    *debounce* seconds, until *stop* is set."""
    last = workspace_fingerprint(workdir).tree
    yield last
    kind = use or backend()
    if kind == "watchfiles":
        import watchfiles

        for _batch in watchfiles.watch(
            workdir,
            watch_filter=_outside_git,
            debounce=int(debounce * 1000),
            stop_event=stop,
            raise_interrupt=True,
            # also wake up now and then: a change made before the watch began is seen too
            rust_timeout=int(poll * 5000),
            yield_on_timeout=True,
        ):
            tree = workspace_fingerprint(workdir).tree
            if tree != last:
                last = tree
                yield tree
        return
    seen = last
    while not stop.wait(poll):
        tree = workspace_fingerprint(workdir).tree
        if tree != seen:  # still changing: wait for a quiet poll
            seen = tree
            continue
        if tree != last:
            last = tree
            yield tree
