"""``gate.states.step_states``: the step states as the gate sees them."""

from __future__ import annotations

import dataclasses

from gitaudit.gate.states import step_states
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.runs import read_run
from gitaudit.plan.catalog import check_worktree
from gitaudit.verdict import Verdict
from tests.adversarial.conftest import World, plan, step


def test_a_pass_counts_as_verified_only_in_a_run_that_counts_as_a_whole(world: World) -> None:
    """The same passing entries: `verified` in a sound run, `pending` in an interrupted one
    (which proves nothing, here or carried)."""
    world.seal(plan(step("a"), step("b")))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    handle = world.handle()
    state = read_state(handle)
    (checked,) = check_worktree(world.path, "default")
    model = checked.require_valid()
    record = read_run(handle.git, recorded.commit)
    assert step_states(handle, state, "default", model, record, ()) == {
        "a": "verified",
        "b": "verified",
    }
    stopped = dataclasses.replace(record, verdict=Verdict.INTERRUPTED)
    assert not stopped.sound
    assert step_states(handle, state, "default", model, stopped, ()) == {
        "a": "pending",
        "b": "pending",
    }
