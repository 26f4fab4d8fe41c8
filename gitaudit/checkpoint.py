"""Pause points inside gitaudit's write windows, for fault tests; inert unless armed.

A fault test must be able to kill ``git audit run``, ``plan seal`` or ``push`` at a known point,
such as between writing a run's objects and moving its ref, instead of at a random instant that
mostly lands before anything is written. Each such point calls :func:`reached` with its name.

Nothing happens unless ``GITAUDIT_TEST_CHECKPOINT_DIR`` names an existing directory **and**
``GITAUDIT_TEST_CHECKPOINTS`` lists the point (comma-separated). Then the process writes
``<dir>/<point>.reached`` (its pid and the detail given, e.g. the commit just written) and waits
until ``<dir>/<point>.go`` exists, at most :data:`MAX_PAUSE_SECONDS`, before it carries on.

It can only pause: nothing read here changes what gitaudit does afterwards, and a pause is no
more than any slow or stopped process (``kill -STOP``) already is, which compare-and-swap and
the stale-lock rules are built for. Standard library only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

DIR_VARIABLE = "GITAUDIT_TEST_CHECKPOINT_DIR"
POINTS_VARIABLE = "GITAUDIT_TEST_CHECKPOINTS"
MAX_PAUSE_SECONDS = 120.0

# every point in the code, and where it is (docs and tests name them from here)
POINTS = {
    "run.objects-written": "a run's tree and signed commit are written; its ref has not moved",
    "run.ref-moved": "a run's ref moved; the seen mark and the lookup cache are not updated",
    "seal.objects-written": "a plans commit is written and signed; refs/audit/plans has not moved",
    "push.replayed": "`git audit push` signed its replays; no ref has moved, local or remote",
    "push.pushed": "`git push` succeeded; the replayed local refs are in place",
}


def reached(point: str, detail: str = "") -> None:
    """Pause at *point* when a fault test armed it (see the module docstring); else nothing."""
    armed = os.environ.get(POINTS_VARIABLE)
    folder = os.environ.get(DIR_VARIABLE)
    if not armed or not folder or point not in armed.split(","):
        return
    where = Path(folder)
    if not where.is_dir():
        return
    (where / f"{point}.reached").write_text(f"{os.getpid()}\n{detail}\n", encoding="utf-8")
    release = where / f"{point}.go"
    deadline = time.monotonic() + MAX_PAUSE_SECONDS
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
