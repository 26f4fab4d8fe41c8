"""Kill stress across several clones: concurrent `git audit push`es to one server with the
pre-receive hook, about half of them SIGKILLed at a pause point or at a random instant (see
tests/faults/kill_stress.py). No command in any clone or on the server ever reports a false
"moved backwards or was rewritten", no run a clone recorded is lost, and after one more push
from each clone every ledger is linear, fsck-clean and verifies.

The numbers are printed (``pytest -s``); ``GITAUDIT_STRESS_CLONES`` and ``GITAUDIT_STRESS_PUSHES``
make it longer (defaults 4 x 10), ``GITAUDIT_STRESS_SEED`` kills elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import age, assert_ledger_sound, cli_argv, env, fsck, lock_files
from tests.faults.kill_stress import REWIND, drive, prepare, server_trees, summary
from tests.gitrepo import audit

CLONES = int(os.environ.get("GITAUDIT_STRESS_CLONES", "4"))
PUSHES = int(os.environ.get("GITAUDIT_STRESS_PUSHES", "10"))


def _said(step: dict[str, Any]) -> str:
    run = " ".join(t["err"] for t in step["run"]["tries"])
    push = step["push"]["out"] + step["push"]["err"]
    return str(run + push + step["status"]["out"] + step["status"]["err"])


@pytest.mark.slow
def test_kills_during_concurrent_pushes_from_several_clones(tmp_path: Path) -> None:
    server, clones = prepare(tmp_path, CLONES)
    began = time.monotonic()
    results = drive(server, clones, PUSHES, timeout=1200)
    stressed = time.monotonic() - began
    numbers = summary(results)

    steps = [s for r in results for s in r["steps"]]
    for step in steps:
        said = _said(step)
        assert REWIND not in said, said  # never a false alarm, in any command
        assert "Traceback" not in said, said
        assert step["run"]["commit"] is not None, step["run"]  # every run was recorded
        if step["push"]["code"] == 0:
            assert step["missing"] == [], step  # reported pushed: on the server, every run so far
            assert step["branch_ok"], step
        # the gate in the clone after each push, killed or not: the clone's own run proves HEAD
        assert step["status"]["code"] == 0, step["status"]
    assert numbers["killed"] >= CLONES * PUSHES // 4, numbers  # the stress did kill

    # the server was never harmed: no lock left (its receive-pack is never killed), fsck-clean
    assert lock_files(server) == []
    checked = fsck(server)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # a minute passes (a lock left by a killed git is stale by then), then each clone pushes once
    # more, unkilled: that push carries whatever the killed ones did not
    finals = []
    for path in clones:
        age(lock_files(path / ".git"))
        final = subprocess.run(
            cli_argv("push"), cwd=path, capture_output=True, text=True, check=False, env=env()
        )
        assert final.returncode == 0, final.stdout + final.stderr
        finals.append(final.stdout)

    recorded = [t for r in results for t in r["recorded"]]
    arrived = Counter(server_trees(server))
    assert [t for t in recorded if arrived[t] == 0] == [], "a recorded run was lost"
    # and none twice: a push moves the local runs ref to the replayed chain before it pushes,
    # so a run replayed once is never replayed again onto another base
    duplicates = sum(arrived[t] - 1 for t in recorded)
    assert duplicates == 0, [t for t in recorded if arrived[t] > 1]
    chain = assert_ledger_sound(server)  # linear, fsck-clean, every commit verifies
    assert len(chain) == 1 + len(recorded)  # the first run, then ours: nothing else
    for i, path in enumerate(clones):
        on_server = audit(server, "status", f"c{i}")
        assert on_server.code == 0, on_server.out + on_server.err
        # the clone's own marks kept: a false rewind would show here
        for args in (["verify"], ["status"], ["sync"]):
            done = audit(path, *args)
            assert done.code == 0 and REWIND not in done.out + done.err, (args, done)
        assert lock_files(path / ".git") == []
        assert_ledger_sound(path)
    numbers.update(seconds=round(stressed, 1), arrived=len(chain) - 1, finals=finals)
    print(f"kill stress: {json.dumps(numbers)}", file=sys.stderr)
