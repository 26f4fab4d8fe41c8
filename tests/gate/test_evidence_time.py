"""``judge_evidence`` called directly with the clock it judges by: ``valid_for`` counts from when
the run began (its signed ``started_at``, never later than its signed commit time), with
:data:`CLOCK_SKEW` seconds of tolerated clock difference for the commit time; and a run on one
plan's ledger that is another plan's evidence is refused.

End to end (through the gate and ``git audit status``): ``tests/adversarial/test_time.py`` and
``tests/adversarial/test_evidence.py``.
"""

from __future__ import annotations

import pygit2
import pytest

from gitaudit.gate.evidence import Evidence, Judging, judge_evidence
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.records import CLOCK_SKEW
from gitaudit.ledger.refs import runs_ref
from gitaudit.ledger.runs import read_run
from gitaudit.plan.catalog import check_worktree
from gitaudit.verdict import Verdict
from tests.adversarial.conftest import STRICT, World, check, plan, step

HOUR = 3600


def _judged(world: World, now: float, name: str = "default") -> Evidence:
    repo = world.handle()
    checked = {c.name: c for c in check_worktree(world.path)}[name]
    assert checked.plan is not None
    tree = str(repo.git.revparse_single("HEAD^{tree}").id)
    judging = Judging(repo, read_state(repo), name, checked.plan, tree, now, None, dict)
    return judge_evidence(judging)


def _signed_at(world: World, name: str = "default") -> int:
    """When the tip of *name*'s ledger was signed (its committer time)."""
    tip = world.ref(runs_ref(name))
    assert tip is not None
    return int(commit_of(world.handle().git, pygit2.Oid(hex=tip), "run").commit_time)


def _began(world: World, name: str = "default") -> int:
    """When the tip of *name*'s ledger began (its signed ``started_at``)."""
    tip = world.ref(runs_ref(name))
    assert tip is not None
    return read_run(world.handle().git, tip).began


@pytest.fixture
def hour_old(world: World) -> tuple[World, int]:
    """Evidence for a step valid for one hour, and the time its run commit was signed."""
    world.seal(plan(step("unit", valid_for="1h")))
    assert world.run().verdict == "PASS"
    return world, _signed_at(world)


def test_evidence_counts_until_valid_for_has_passed(hour_old: tuple[World, int]) -> None:
    world, _signed = hour_old
    began = _began(world)
    fresh = _judged(world, began + HOUR)  # the last second it counts
    assert fresh.reasons == () and fresh.until == float(began + HOUR)
    stale = _judged(world, began + HOUR + 1)
    assert [(r.code, r.verdict, r.step) for r in stale.reasons] == [
        ("evidence.expired", Verdict.UNKNOWN, "unit")
    ]
    assert "expired at" in stale.reasons[0].message


def test_evidence_dated_in_the_future_beyond_the_skew_is_refused(
    hour_old: tuple[World, int],
) -> None:
    """A run signed more than CLOCK_SKEW seconds after the judge's clock would stay fresh too
    long: FAIL; within the skew it counts (runners' clocks drift a little)."""
    world, signed = hour_old
    assert _judged(world, signed - CLOCK_SKEW).reasons == ()
    ahead = _judged(world, signed - CLOCK_SKEW - 1)
    assert [(r.code, r.verdict, r.step) for r in ahead.reasons] == [
        ("evidence.future", Verdict.FAIL, "unit")
    ]


def test_evidence_counts_from_when_the_run_began_not_when_it_was_signed(world: World) -> None:
    """The run is signed when it ends: a check made at its start is as old as the run, so a
    later slow step does not keep it fresh for longer (the commit time bounds the start)."""
    world.repo.write("slow.sh", "sleep 3\n")
    world.seal(plan(step("unit", valid_for="1h"), step("slow", check("sh", "slow.sh"))))
    assert world.run().verdict == "PASS"
    began, signed = _began(world), _signed_at(world)
    assert signed - 5 <= began <= signed - 2
    assert _judged(world, began + HOUR).until == float(began + HOUR)
    stale = _judged(world, began + HOUR + 1)
    assert [(r.code, r.step) for r in stale.reasons] == [("evidence.expired", "unit")]


def test_a_step_without_valid_for_never_expires(world: World) -> None:
    world.seal(plan(step("unit")))
    assert world.run().verdict == "PASS"
    signed = _signed_at(world)
    judged = _judged(world, signed + 3650 * 24 * HOUR)
    assert judged.reasons == () and judged.until is None


def test_another_plans_run_on_the_ledger_is_replayed_evidence(world: World) -> None:
    """Plans a and b have the same contract; a's genuine run is put on b's ledger."""
    world.seal(STRICT, "a")
    world.seal(STRICT, "b")
    assert world.run("a").verdict == "PASS"
    tip = world.ref(runs_ref("a"))
    assert tip is not None
    assert _judged(world, float(_signed_at(world, "a")), "a").reasons == ()
    world.set_ref(runs_ref("b"), tip)
    judged = _judged(world, float(_signed_at(world, "a")), "b")
    assert [(r.code, r.verdict) for r in judged.reasons] == [("evidence.replayed", Verdict.FAIL)]
    assert "evidence for plan 'a', not 'b'" in judged.reasons[0].message
