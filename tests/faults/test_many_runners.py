"""16 runners x 25 runs, pushed concurrently to one bare server with the pre-receive hook:
nothing is lost, nothing is refused but a lost race (which the push retries), and every run
that arrives verifies (see tests/faults/many_runners.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.faults.conftest import assert_ledger_sound
from tests.faults.many_runners import drive, prepare
from tests.gitrepo import git

RUNNERS = 16
RUNS = 25


@pytest.mark.slow
def test_sixteen_runners_push_twenty_five_runs_each(tmp_path: Path) -> None:
    server, clones = prepare(tmp_path, RUNNERS)
    results = drive(clones, RUNS, timeout=1200)
    for result in results:
        assert result["recorded"] == RUNS
        for push in result["pushes"]:
            *lost, last = push["attempts"]
            assert last["code"] == 0, last["err"]  # every batch landed
            assert all(a["lost_race"] for a in lost), lost  # only lost races were retried
    chain = assert_ledger_sound(server)  # linear, fsck-clean, every commit verified
    assert len(chain) == RUNNERS * RUNS + 1  # the first run, then exactly 400: none lost
    trees = Counter(
        git(
            server,
            "log",
            "--format=%(trailers:key=Audit-Tree,valueonly)",
            "refs/audit/runs/default",
        ).split()
    )
    for path in clones:
        tree = git(path, "rev-parse", "HEAD^{tree}").strip()
        assert trees[tree] == RUNS, (path.name, trees[tree])
