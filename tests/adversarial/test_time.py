"""Attacks on freshness: `valid_for` counts from the signed committer time of the run."""

from __future__ import annotations

import time
import types
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.signers import Signer
from gitaudit.ledger import agent_ops, agents
from gitaudit.ledger.agents import DEFAULT_LEASE
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import MIRROR, runs_ref
from gitaudit.ledger.seals import trust_add
from gitaudit.ledger.trust import EvidenceRule
from tests.adversarial.conftest import World, assert_plan, check, codes, only, plan, runner, step
from tests.adversarial.test_agents import _cli
from tests.adversarial.test_agents import crew as crew  # noqa: PLC0414 (fixture)
from tests.adversarial.test_evidence import failing as failing  # noqa: PLC0414 (fixture)
from tests.adversarial.test_runner_rules import MAIN, rule
from tests.gitrepo import audit
from tests.run.test_memo import pre_push

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


def _recorded_at(world: World, run: str, when: int) -> pygit2.Oid:
    """Run *run* as ci records it on another machine whose clock says *when*: the same tree and
    message (its trailers), signed by ci on top of the ledger's tip."""
    git = world.handle().git
    original = git[pygit2.Oid(hex=run)].peel(pygit2.Commit)
    tip = world.ref(RUNS)
    assert tip is not None
    oid = world.commit_object(
        git, original.tree_id, [pygit2.Oid(hex=tip)], original.message, world.ci, when=when
    )
    world.set_ref(RUNS, oid)
    return oid


@pytest.mark.parametrize("hide", ["remote-tracking copy", "targeted run", "copy before a push"])
def test_attack_time_newer_failure_signed_with_an_earlier_time(
    failing: tuple[World, str, Path], hide: str
) -> None:
    """ci records from two machines whose clocks differ (a slow clock is never refused): the
    PASS run is signed at the right time, the FAIL run recorded after it on the ledger is dated
    two minutes earlier. The newest run on the ledger is the FAIL. The agent then writes a
    remote-tracking copy of the ledger (`refs/gitaudit/remotes/...`) at the PASS run (or at the
    PASS run's commit from before a push signed it again), or has a targeted run of lint
    recorded, so the gate composes the tree's runs: ordered by signed time alone, the older
    PASS outranked the newer FAIL and the gate said PASS (before the fix)."""
    world, passed, _flag = failing
    failed = world.ref(RUNS)
    assert failed is not None
    now = int(time.time())
    again = _recorded_at(world, passed, now)  # machine A: the right time
    _recorded_at(world, failed, now - 120)  # machine B: two minutes slow
    assert_plan(world.gate(), "step.failed", "FAIL")
    if hide == "remote-tracking copy":
        world.set_ref(f"{MIRROR}/origin/audit/runs/default", again)
    elif hide == "copy before a push":
        # the PASS run as it was before `git audit push` signed it again onto the shared ledger
        # (same tree, message and signed time, another parent; kept by the reflog or another
        # remote): on no chain of ours, so only its clock would order it
        git = world.handle().git
        replayed = git[again].peel(pygit2.Commit)
        before = world.commit_object(
            git, replayed.tree_id, [], replayed.message, world.ci, when=replayed.commit_time
        )
        world.set_ref(f"{MIRROR}/laptop/audit/runs/default", before)
    else:
        assert world.run(targets=["lint"]).verdict == "UNKNOWN"  # unit: not run, lint: passed
    judged = only(world.gate())
    assert judged.verdict == "FAIL", judged
    assert "step.failed" in codes(judged)
    assert world.cli("status").code == 1


def test_attack_time_memo_outlives_the_second_runners_evidence(world: World) -> None:
    """main needs two runners (ci and ci2) whose newest runs PASSed and are fresh (unit is valid
    for 30 s). ci2 ran first, ci 15 s later: the PASS for main is remembered until ci's evidence
    expires. Once ci2's has expired, main's rule holds for one runner only (UNKNOWN), but the
    pre-push hook served the remembered PASS (before the fix): the memo's expiry now includes
    the freshness of every runner the rule counted."""
    world.seal(plan(step("unit", valid_for="30s")))
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    recorded = world.run(signer=second)
    assert recorded.commit is not None
    first = world.handle().git[pygit2.Oid(hex=recorded.commit)].peel(pygit2.Commit).commit_time
    time.sleep(max(0.0, first + 15 - time.time()))
    assert world.run().verdict == "PASS"
    assert world.gate(for_ref=MAIN).verdict == "PASS"  # remembered, for main
    code, _path, err = pre_push(world.repo)
    assert code == 0, err
    time.sleep(max(0.0, first + 31 - time.time()))
    judged = assert_plan(world.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    assert "passing runs for this tree by ci;" in judged.reasons[0].message + ";"
    code, _path, err = pre_push(world.repo)
    assert code != 0, err


@pytest.mark.parametrize(
    "ahead", [DEFAULT_LEASE + 120, 365 * DAY], ids=["past-the-lease", "a-year"]
)
def test_attack_time_agents_claim_taken_over_by_a_record_dated_ahead(
    crew: World, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    """mal holds a trusted runner key of his own (an agent's key, in the multi-agent set-up)
    and signs his claim on ann's unit with a time past ann's lease: ann's claim, live by every
    clock, looked stale at the record's signed time and was taken over; mal then edited ann's
    src/a.py and ran, no live claim stood in his way, and the gate said PASS (before the fix).
    A record dated further ahead than the tolerated skew is refused until its time comes."""
    trust_add(crew.handle(), crew.alice, crew.mallory.public_key, "runner", "mallory")
    assert _cli(crew, "agents", "register", "mal", key="mallory").code == 0
    when = time.time() + ahead
    with monkeypatch.context() as clock:  # mal's clock, or a record he signs by hand
        fake = types.SimpleNamespace(time=lambda: when, strftime=time.strftime, gmtime=time.gmtime)
        clock.setattr(agents, "time", fake)
        base = str(crew.handle().git.revparse_single("HEAD^{tree}").id)
        written = agent_ops.claim(
            crew.handle(),
            crew.mallory,
            read_state(crew.handle()),
            "mal",
            "default",
            "unit",
            ["src/a.py"],
            base,
        )
        assert written.warnings[0].startswith("took over the stale claim #3 of agent ann")
    crew.repo.write("src/a.py", "mal was here\n")
    crew.repo.commit("mal's change")
    _cli(crew, "run", key="mallory", env={"GITAUDIT_AGENT": "mal"})
    judged = assert_plan(crew.gate(), "agents.registry", "FAIL")
    assert "ahead of this machine's clock" in judged.reasons[0].message
    assert crew.cli("status").code == 1


def test_attack_time_run_dated_by_the_environment(world: World) -> None:
    """The agent runs `git audit run` (ci's key) with the clock settings a process takes from
    its environment set a day ahead: git's `GIT_COMMITTER_DATE` and `GIT_AUTHOR_DATE`, a far
    time zone (`TZ`, UTC+14) and libfaketime's `FAKETIME`, so the evidence would be dated a day
    later and stay fresh a day too long. The signed time is the machine's clock in UTC: the
    evidence expires when its `valid_for` says. (A clock faked under the process itself, with
    libfaketime preloaded, signs a record dated ahead, which the gate refuses:
    `test_attack_time_committer_date_in_the_future`.)"""
    world.seal(plan(step("unit", valid_for="3s")))
    ahead = int(time.time()) + DAY
    clock = {
        "GIT_COMMITTER_DATE": f"@{ahead} +0000",
        "GIT_AUTHOR_DATE": f"@{ahead} +0000",
        "TZ": "Pacific/Kiritimati",
        "FAKETIME": "+1d",
    }
    before = time.time()
    ran = audit(world.path, "run", "--key", str(world.keys["ci"]), env=clock, process=True)
    assert ran.code == 0, ran.out + ran.err
    run = world.ref(RUNS)
    assert run is not None
    signed = world.handle().git[pygit2.Oid(hex=run)].peel(pygit2.Commit).commit_time
    assert before - 1 <= signed <= time.time() + 1
    assert world.gate().verdict == "PASS"
    time.sleep(max(0.0, signed + 4.1 - time.time()))
    judged = assert_plan(world.gate(), "evidence.expired", "UNKNOWN")
    assert judged.reasons[0].step == "unit"


@pytest.mark.parametrize("slow", ["a later step", "a later check of the step"])
def test_attack_time_run_held_open_after_the_check(world: World, slow: str) -> None:
    """`probe` is valid for 3 s. The agent makes the run last longer after probe's check ran:
    a later step, or a later check of probe itself, runs a script of the tree that sleeps 6 s
    (any slow code of its own, a run held stopped). The run is signed when it ends, and
    freshness counted from that signed time: 5 s after probe's check, its evidence was still
    fresh, and the gate, `status` (the memo refreshed by the run) and pre-push said PASS
    (before the fix). Freshness counts from the run's signed `started_at` (never later than
    its commit time): the evidence has expired (UNKNOWN)."""
    world.repo.write("slow.sh", "sleep 6\n")
    sleeper = check("sh", "slow.sh", timeout=30)
    if slow == "a later step":
        world.seal(plan(step("probe", valid_for="3s"), step("slow", sleeper)))
    else:
        world.seal(plan(step("probe", check("true"), sleeper, valid_for="3s")))
    assert world.run().verdict == "PASS"
    run = world.ref(RUNS)
    assert run is not None
    signed = world.handle().git[pygit2.Oid(hex=run)].peel(pygit2.Commit).commit_time
    assert time.time() < signed + 3  # what the old rule counted as fresh
    judged = assert_plan(world.gate(), "evidence.expired", "UNKNOWN")
    assert judged.reasons[0].step == "probe"
    assert world.cli("status").code == 3
    code, _path, err = pre_push(world.repo)
    assert code != 0, err


def test_a_run_s_own_duration_does_not_expire_fresh_evidence(world: World) -> None:
    """Control: the same slow run with probe valid for 30 s passes, remembered and all."""
    world.repo.write("slow.sh", "sleep 2\n")
    world.seal(plan(step("probe", valid_for="30s"), step("slow", check("sh", "slow.sh"))))
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"
    assert world.cli("status").code == 0


@pytest.mark.parametrize("again", ["lint alone", "a new tree, unit's inputs unchanged"])
def test_attack_time_second_runners_agreement_rests_on_an_expired_carried_pass(
    world: World, again: str
) -> None:
    """main needs two runners (ci and ci2) whose newest runs PASSed and are fresh; unit is valid
    for 8 s. ci2 executes the plan, then 4 s later runs it again (lint alone; or every step of
    a new commit that leaves unit's inputs as they were): its newest run carries unit's pass
    from its first run, then still fresh. ci executes the plan. Once unit's execution by ci2 is
    8 s old, ci2's word on unit has expired, but the rule counted ci2's agreement fresh from
    when its newest, carrying run began, and main PASSed with one runner's fresh evidence of
    unit (the gate, `status --for` and the pre-push hook, both variants before the fix). A
    runner's word is fresh only while each step it executed or carried is, counted from the run
    that executed it: UNKNOWN (`evidence.runner-rule`)."""
    world.repo.write("src/a.txt", "a\n")
    world.repo.commit("src")
    world.seal(plan(step("unit", valid_for="8s", inputs=["src/**"]), step("lint")))
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    first = world.run(signer=second)
    assert first.verdict == "PASS" and first.commit is not None
    began = world.handle().git[pygit2.Oid(hex=first.commit)].peel(pygit2.Commit).commit_time
    time.sleep(max(0.0, began + 4 - time.time()))
    if again == "lint alone":
        carrying = world.run(signer=second, targets=["lint"])
    else:
        world.repo.write("README.md", "changed outside unit's inputs\n")
        world.repo.commit("readme")
        carrying = world.run(signer=second)
    assert carrying.doc["steps"]["unit"]["status"] == "carried", carrying.doc
    assert world.run(signer=world.ci, fresh=True).verdict == "PASS"
    assert world.gate(for_ref=MAIN).verdict == "PASS"  # control: both fresh
    time.sleep(max(0.0, began + 9.5 - time.time()))
    judged = assert_plan(world.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    assert "passing runs for this tree by ci;" in judged.reasons[0].message + ";"
    assert world.cli("status", "--for", MAIN).code != 0
    code, _path, err = pre_push(world.repo)
    assert code != 0, err


def _second_runners_run_dated(world: World, signer: Signer, ahead: int) -> None:
    """ci2's newest run recorded again by ci2 on a machine whose clock is *ahead* seconds
    ahead: its run.json's `started_at` and its signed commit time both say so, its message (its
    trailers) as the original's."""
    git = world.handle().git
    tip = world.ref(RUNS)
    assert tip is not None
    when = int(time.time()) + ahead

    def dated(doc: dict[str, Any]) -> None:
        doc["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))

    made = world.forge_run(tip, signer=signer, edit=dated, when=when, move=False)
    original = git[pygit2.Oid(hex=tip)].peel(pygit2.Commit)
    tree = git[made].peel(pygit2.Commit).tree_id
    oid = world.commit_object(git, tree, [pygit2.Oid(hex=tip)], original.message, signer, when=when)
    world.set_ref(RUNS, oid)


@pytest.mark.parametrize("ahead", [DAY, 365 * DAY], ids=["a-day", "a-year"])
def test_attack_time_second_runners_agreement_dated_in_the_future(world: World, ahead: int) -> None:
    """main needs two runners (ci and ci2) whose newest runs PASSed and are fresh; unit is valid
    for 4 s. ci2's run is recorded by a machine whose clock is a day (a year) ahead. As the run
    judged, such a run is refused outright (`evidence.future`), but the rule's tally counted
    ci2's agreement fresh from its signed start, a day ahead: once ci had run, main PASSed, and
    went on passing after ci2's real execution of unit was 4 s old (before the fix). A run
    signed beyond the tolerated skew is no runner's agreement: UNKNOWN
    (`evidence.runner-rule`)."""
    world.seal(plan(step("unit", valid_for="4s")))
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    assert world.run(signer=second).verdict == "PASS"
    _second_runners_run_dated(world, second, ahead)
    assert world.run(fresh=True).verdict == "PASS"
    judged = assert_plan(world.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    assert "passing runs for this tree by ci;" in judged.reasons[0].message + ";"
    assert world.cli("status", "--for", MAIN).code != 0
    code, _path, err = pre_push(world.repo)
    assert code != 0, err


def test_a_second_runners_clock_within_the_skew_agrees(world: World) -> None:
    """Control: ci2's clock 60 s ahead (300 s tolerated): its run still agrees, main PASSes."""
    world.seal(plan(step("unit", valid_for="1h")))
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    assert world.run(signer=second).verdict == "PASS"
    _second_runners_run_dated(world, second, 60)
    assert world.run(fresh=True).verdict == "PASS"
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict == "PASS", judged.reasons
    assert "passing runs for this tree by ci, ci2" in " ".join(judged.notes), judged.notes
