"""Attacks on freshness: `valid_for` counts from the signed committer time of the run."""

from __future__ import annotations

import time

from gitaudit.ledger.refs import runs_ref
from tests.adversarial.conftest import World, assert_plan, plan, step

RUNS = runs_ref("default")
DAY = 86400


def _resigned_at(world: World, when: int) -> None:
    """The genuine run re-signed by ci (a trusted runner whose clock is off) at *when*."""
    tip = world.ref(RUNS)
    assert tip is not None
    world.forge_run(tip, signer=world.ci, when=when)


def test_attack_time_expired_evidence(world: World) -> None:
    """Genuine evidence for a step valid for 1 s, judged 2 s later."""
    world.seal(plan(step("unit", valid_for="1s")))
    assert world.run().verdict == "PASS"
    time.sleep(2.1)
    judged = assert_plan(world.gate(), "evidence.expired", "UNKNOWN")
    assert judged.reasons[0].step == "unit"


def test_attack_time_committer_date_in_the_future(world: World) -> None:
    """A run dated a day ahead would stay fresh a day too long: refused outright."""
    world.seal(plan(step("unit", valid_for="1h")))
    assert world.run().verdict == "PASS"
    _resigned_at(world, int(time.time()) + DAY)
    judged = assert_plan(world.gate(), "evidence.future", "FAIL")
    assert judged.reasons[0].step == "unit"


def test_attack_time_committer_date_in_the_past(world: World) -> None:
    """A run dated ten years back is older than its 30-day validity."""
    world.seal(plan(step("unit", valid_for="30d")))
    assert world.run().verdict == "PASS"
    _resigned_at(world, int(time.time()) - 3650 * DAY)
    judged = assert_plan(world.gate(), "evidence.expired", "UNKNOWN")
    assert "expired at" in judged.reasons[0].message


def test_attack_time_future_date_within_tolerated_skew(world: World) -> None:
    """Control: 60 s of clock skew is tolerated (300 s allowed), so honest runners whose clocks
    drift a little are not refused."""
    world.seal(plan(step("unit", valid_for="1h")))
    assert world.run().verdict == "PASS"
    _resigned_at(world, int(time.time()) + 60)
    assert world.gate().verdict == "PASS"
