"""What a run's signature does not vouch for (:mod:`gitaudit.gate.authority`), at the unit
level: a pass settled by reconciliation is judged as the execution it settles.

End to end: ``tests/adversarial/test_reconcile.py``.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitaudit.gate.authority import Copies, _settled_execution, past_exhaustion, unreconciled
from gitaudit.gate.result import Reason
from gitaudit.ledger import index
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import runs_ref
from gitaudit.ledger.runs import read_run
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import World, check, plan, step

RUNS = runs_ref("default")


def _judge(world: World, run: str) -> tuple[Reason | None, Reason | None]:
    """(past_exhaustion, unreconciled) for deploy of *run*, on the plan's own ledger."""
    repo = world.handle()
    git, state = repo.git, read_state(repo)
    (checked,) = check_worktree(world.path, "default")
    assert checked.plan is not None
    tip = world.ref(RUNS)
    assert tip is not None
    copies = Copies(
        (("default", pygit2.Oid(hex=tip)),),
        lambda key: index.tallies(git, repo.gitdir, key),
    )
    record = read_run(git, run)
    return (
        past_exhaustion(git, state, "default", checked.plan, record, "deploy", copies),
        unreconciled(git, state, "default", record, "deploy", copies),
    )


def test_a_settled_pass_is_judged_as_the_execution_it_settles(world: World, tmp_path: Path) -> None:
    """deploy timed out (run X); a first readback was inconclusive (it timed out too), a second
    found the deployment: the settled pass is judged at X, past the inconclusive readback, and
    counts. Then deploy is exhausted, forced, times out and is read back: the settled pass is
    judged at the forced execution, past its exhaustion."""
    slow, fail, hang = tmp_path / "slow", tmp_path / "fail", tmp_path / "hang"
    script = f"test -e {fail} && exit 1; touch deployed.txt; test -e {hang} && sleep 30; exit 0"
    readback = check("sh", "-c", f"test -e {slow} && sleep 30; test -e deployed.txt", timeout=0.5)
    world.repo.write(".gitignore", "deployed.txt\n")
    world.seal(
        plan(
            step(
                "deploy",
                check("sh", "-c", script, timeout=0.5),
                idempotent=False,
                readback=[readback],
                workspace="live",
                max_attempts=1,
            )
        )
    )
    hang.touch()
    executed = world.run()
    assert executed.doc["steps"]["deploy"]["status"] == "unknown"
    slow.touch()
    key = str(world.keys["ci"])
    assert world.cli("reconcile", "deploy", "--readback", "--key", key).code == 3  # inconclusive
    slow.unlink()
    assert world.cli("reconcile", "deploy", "--readback", "--key", key).code == 0
    settled = str(world.ref(RUNS))
    git = world.handle().git
    below = git.revparse_single(f"{settled}^").id
    assert _settled_execution(git, below, "default", "deploy") == executed.commit
    assert _judge(world, settled) == (None, None)
    assert world.gate().verdict == "PASS"

    fail.touch()
    hang.unlink()
    assert world.run().doc["steps"]["deploy"]["status"] == "failed"  # exhausted now
    fail.unlink()
    hang.touch()
    forced = world.run(force=True)
    assert forced.doc["steps"]["deploy"]["status"] == "unknown"
    assert world.cli("reconcile", "deploy", "--readback", "--key", key).code == 0
    settled = str(world.ref(RUNS))
    below = git.revparse_single(f"{settled}^").id
    assert _settled_execution(git, below, "default", "deploy") == forced.commit
    exhausted, unsettled = _judge(world, settled)
    assert unsettled is None
    assert exhausted is not None and exhausted.code == "evidence.past-exhaustion"
