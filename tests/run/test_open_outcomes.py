"""Which unknown outcomes `git audit run` waits on (:func:`gitaudit.run.recorder.open_outcomes`):
the tallies' unknown and interrupted ones, and a reconciliation made here whose programs this
PATH does not offer. End to end: ``tests/adversarial/test_reconcile.py``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gitaudit.ledger import index
from gitaudit.ledger.refs import runs_ref
from gitaudit.run.recorder import open_outcomes
from tests.adversarial.conftest import World, check, plan, step
from tests.adversarial.conftest import world as world  # noqa: PLC0414 (fixture)

RUNS = runs_ref("default")


def _open(world: World) -> dict[str, str]:
    repo = world.handle()
    return open_outcomes(repo, index.tallies(repo.git, repo.gitdir, "default"), frozenset({"d"}))


def test_a_reconciliation_under_another_path_leaves_the_outcome_open(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """d timed out: open. Settled by a readback whose `grep` came from another folder: open
    for this PATH, settled for that one. Settled by a readback under this PATH: settled."""
    world.repo.write(".gitignore", "done.txt\n")
    world.repo.write("done.txt", "done\n")
    world.seal(
        plan(
            step(
                "d",
                check("sleep", "30", timeout=0.5),
                idempotent=False,
                readback=[check("grep", "-qx", "done", "done.txt")],
                workspace="live",
            )
        )
    )
    unknown = world.run().commit
    assert _open(world) == {"d": unknown}
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "grep").symlink_to(shutil.which("false") or "/bin/false")
    honest = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{folder}:{honest}")
    world.cli("reconcile", "d", "--readback", "--key", str(world.keys["ci"]))
    elsewhere = world.ref(RUNS)
    assert _open(world) == {}  # under that PATH its readback settled d (as failed)
    monkeypatch.setenv("PATH", honest)
    assert _open(world) == {"d": elsewhere}
    assert world.cli("reconcile", "d", "--readback", "--key", str(world.keys["ci"])).code == 0
    assert _open(world) == {}
