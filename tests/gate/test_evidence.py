"""``gitaudit.gate.evidence.judge_evidence`` called directly: what it finds in a runner-signed run
it does not take from the run's own word.

End to end (the same situations through ``git audit status``): ``tests/adversarial/``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.gate.compose import Source, newest_first, prove
from gitaudit.gate.evidence import Evidence, Judging, judge_evidence
from gitaudit.gate.result import Reason
from gitaudit.ledger.objects import write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.records import CheckEntry, RunRecord, StepEntry, UpstreamEntry
from gitaudit.ledger.refs import runs_ref
from gitaudit.places import marks_path
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.load import load_plan
from gitaudit.verdict import StepStatus, Verdict
from tests.adversarial.conftest import World, check, plan, runner, step
from tests.gitrepo import forget_marks

RUNS = runs_ref("default")


def _evidence(world: World, pushed: pygit2.Oid | None = None) -> Evidence:
    repo = world.handle()
    (checked,) = check_worktree(world.path, "default")
    assert checked.plan is not None
    tree = str(repo.git.revparse_single("HEAD^{tree}").id)
    judging = Judging(
        repo, read_state(repo), "default", checked.plan, tree, time.time(), pushed, dict
    )
    return judge_evidence(judging)


def _lie(doc: dict[str, Any]) -> None:
    doc["verdict"], doc["reasons"] = "PASS", []


def test_a_mandatory_requirement_no_verified_step_covers_is_refused(world: World) -> None:
    """`ship` needs `fast` or `thorough`; `thorough` alone covers the must requirement R2 and the
    should requirement R3, and fails; the may requirement R4 is nobody's. A runner-signed run
    that says PASS proves every required step, but not R2 and R3: the gate counts coverage
    itself."""
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    ship = step("ship", check("true"))
    ship["depends_on"] = [{"any_of": ["fast", "thorough"]}]
    ship["requires_outputs"] = [{"step": "fast", "name": "o"}, {"step": "thorough", "name": "o"}]
    requirements = [
        {"id": "R", "description": "it ships", "priority": "must"},
        {"id": "R2", "description": "it is tested thoroughly", "priority": "must"},
        {"id": "R3", "description": "it is tested twice", "priority": "should"},
        {"id": "R4", "description": "it is admired", "priority": "may"},
    ]
    steps = [
        step("fast", check("true"), outputs=out),
        step("thorough", check("false"), covers=["R2", "R3", "R4"], outputs=out),
        ship,
    ]
    world.seal({"task": "coverage", "requirements": requirements, "steps": steps})
    world.run()
    honest = _evidence(world)
    assert [r.code for r in honest.reasons] == ["evidence.unknown"]
    tip = world.ref(RUNS)
    assert tip is not None
    lied = world.forge_run(tip, edit=_lie, signer=world.ci)
    judged = _evidence(world)
    fix = "git audit run --plan default"
    assert judged.reasons == (
        Reason(
            "evidence.uncovered", "must requirement R2 is not covered by verified evidence", fix
        ),
        Reason(
            "evidence.uncovered", "should requirement R3 is not covered by verified evidence", fix
        ),
    )
    assert judged.run == str(lied)


def test_a_passing_run_that_covers_everything_has_no_reasons(proven: World) -> None:
    judged = _evidence(proven)
    assert judged.reasons == ()
    assert judged.run == proven.ref(RUNS)
    assert judged.record is not None and judged.record.commit == judged.run


def _step(doc: dict[str, Any], sid: str, **entry: Any) -> None:
    doc["verdict"], doc["reasons"] = "UNKNOWN", ["forged"]
    doc["steps"][sid].update(entry)


def test_a_failed_step_points_at_its_output(sealed: World) -> None:
    """A required step that failed: FAIL, and the fix starts with the command that shows the
    failing output of that very run."""
    sealed.run()
    tip = sealed.ref(RUNS)
    assert tip is not None
    failed = sealed.forge_run(
        tip, edit=lambda d: _step(d, "lint", status="failed"), signer=sealed.ci
    )
    judged = _evidence(sealed)
    assert judged.reasons == (
        Reason(
            "step.failed",
            "step lint failed",
            f"`git audit show {str(failed)[:12]} --step lint` shows the output; fix it, then "
            "`git audit run --plan default`",
            "lint",
            Verdict.FAIL,
        ),
    )


@pytest.mark.parametrize(
    ("passed", "outcome", "broken"),
    [(False, "failed", True), (False, "unknown", False), (True, "passed", False)],
    ids=["upstream output broken", "upstream output timed out", "upstream output held"],
)
def test_a_blocked_step_decides_only_when_an_upstream_output_broke(
    sealed: World, passed: bool, outcome: str, broken: bool
) -> None:
    """The newest run has lint blocked. Because the output it needs, re-executed right before
    it, no longer held: FAIL, the work is wrong, whatever older runs proved. Blocked for any
    other reason (a timeout says nothing about the output): it proves nothing either way, and
    the older PASS run of the same tree still proves lint."""
    sealed.run()
    tip = sealed.ref(RUNS)
    assert tip is not None
    check_entry = {"check": "exists", "outcome": outcome, "message": "re-executed"}
    upstream = [{"step": "unit", "output": "o", "passed": passed, "checks": [check_entry]}]
    blocked = sealed.forge_run(
        tip,
        edit=lambda d: _step(d, "lint", status="blocked", reason="upstream", upstream=upstream),
        signer=sealed.ci,
    )
    judged = _evidence(sealed)
    if not broken:
        assert judged.reasons == ()
        return
    assert judged.reasons == (
        Reason(
            "step.blocked",
            "step lint blocked: upstream",
            f"`git audit show {str(blocked)[:12]} --step lint` shows the output; fix it, then "
            "`git audit run --plan default`",
            "lint",
            Verdict.FAIL,
        ),
    )


def _ship_plan(world: World, *, must_alternative: bool = False) -> None:
    """`ship` needs `fast` or `thorough`; `deploy` needs `ship`. Sealed, and a run of it."""
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    ship = step("ship", deps=[{"any_of": ["fast", "thorough"]}], outputs=out)
    ship["requires_outputs"] = [{"step": "fast", "name": "o"}, {"step": "thorough", "name": "o"}]
    deploy = step("deploy", deps=["ship"], requires_outputs=[{"step": "ship", "name": "o"}])
    rest = [deploy]
    if must_alternative:
        rest.append(
            step("audit", deps=["thorough"], requires_outputs=[{"step": "thorough", "name": "o"}])
        )
    world.seal(plan(step("fast", outputs=out), step("thorough", outputs=out), ship, *rest))
    assert world.run().verdict == "PASS"


@pytest.mark.parametrize("failed", [("fast", "thorough"), ("fast",)], ids=["both", "one"])
def test_a_step_counts_only_beside_a_proven_alternative_of_each_clause(
    world: World, failed: tuple[str, ...]
) -> None:
    """A runner-signed run says ship and deploy passed while both alternatives of ship's any_of
    clause failed (what a run that carried ship wrote): ship is not proven, nor is deploy, which
    needs it; only ship is named, the step whose clause has no proven alternative (an OR
    alternative is not reported by itself). With one alternative proven, everything counts."""
    _ship_plan(world)
    tip = world.ref(RUNS)
    assert tip is not None

    def alternatives_failed(doc: dict[str, Any]) -> None:
        for sid in failed:
            doc["steps"][sid].update(status="failed", reason="forged")

    world.forge_run(tip, edit=alternatives_failed, signer=world.ci)
    judged = _evidence(world)
    if failed == ("fast",):
        assert judged.reasons == ()
        return
    assert judged.reasons == (
        Reason(
            "evidence.prerequisite-unproven",
            "step ship is recorded as proven, but no alternative of its prerequisite "
            "any_of(fast, thorough) is proven in the evidence for this tree",
            "git audit run --plan default",
            "ship",
            Verdict.UNKNOWN,
        ),
    )


def test_an_unproven_alternative_another_step_requires_is_named_once(world: World) -> None:
    """thorough is also required by itself (audit needs it): its failure is named as such, and
    ship, whose clause it leaves without a proven alternative, is not counted but not named
    again."""
    _ship_plan(world, must_alternative=True)
    tip = world.ref(RUNS)
    assert tip is not None

    def alternatives_failed(doc: dict[str, Any]) -> None:
        for sid in ("fast", "thorough"):
            doc["steps"][sid].update(status="failed", reason="forged")

    world.forge_run(tip, edit=alternatives_failed, signer=world.ci)
    assert [(r.code, r.step) for r in _evidence(world).reasons] == [("step.failed", "thorough")]


def test_a_run_no_trusted_runner_signed_is_named(sealed: World) -> None:
    """mallory's run on the plan's own ledger: tampering, and the run judged is named."""
    sealed.run()
    tip = sealed.ref(RUNS)
    assert tip is not None
    forged = sealed.forge_run(tip, signer=sealed.mallory)
    judged = _evidence(sealed)
    assert [r.code for r in judged.reasons] == ["evidence.untrusted"]
    assert judged.run == str(forged)


@pytest.mark.parametrize("signer", ["ci", "mallory"])
def test_a_run_record_of_the_wrong_shape_is_named(sealed: World, signer: str) -> None:
    """A run.json the reader refuses: malformed when a trusted runner signed it, untrusted when
    not; either way the run judged is named, for `git audit show`."""
    sealed.run()
    tip = sealed.ref(RUNS)
    assert tip is not None

    def misshape(doc: dict[str, Any]) -> None:
        doc["steps"]["lint"]["status"] = 3

    forged = sealed.forge_run(tip, edit=misshape, signer=getattr(sealed, signer))
    judged = _evidence(sealed)
    want = "evidence.malformed" if signer == "ci" else "evidence.untrusted"
    assert [r.code for r in judged.reasons] == [want]
    assert judged.run == str(forged)
    if signer == "ci":
        (reason,) = judged.reasons
        assert reason.message.startswith(
            "the evidence of plan 'default' for this tree cannot be read: "
        )
        assert reason.hint == "git audit verify; then `git audit run --plan default`"


MIRROR = "refs/gitaudit/remotes/origin/audit/runs/default"


def test_evidence_fetched_from_another_clone_is_noted(sealed: World) -> None:
    """The run is on origin's copy of the ledger only (another clone recorded it): it proves
    the plan, and the answer says where it came from."""
    sealed.run()
    tip = sealed.ref(RUNS)
    assert tip is not None
    sealed.set_ref(MIRROR, tip)
    # as in a clone that never recorded a run itself: no ledger of its own, none seen
    sealed.repo.git("update-ref", "-d", RUNS)
    marks = sealed.handle().state_dir / "watermarks.json"
    marks.write_text(json.dumps({**json.loads(marks.read_text()), "seen": {}}))
    Path(marks_path(sealed.handle().gitdir)).unlink(missing_ok=True)  # nor its floors
    judged = _evidence(sealed)
    assert judged.reasons == () and judged.run == tip
    assert "the evidence was recorded elsewhere and fetched from origin" in judged.notes


def test_a_copy_from_another_clone_that_cannot_be_read_is_ignored_with_a_note(
    proven: World,
) -> None:
    """origin's copy holds a newer run for the tree that the reader refuses: on a copy of
    someone else's ledger that is not tampering with ours, only noted; our own PASS stands."""
    tip = proven.ref(RUNS)
    assert tip is not None

    def misshape(doc: dict[str, Any]) -> None:
        doc["steps"]["lint"]["status"] = 3

    bad = proven.forge_run(tip, edit=misshape, signer=proven.ci, move=False)
    proven.set_ref(MIRROR, bad)
    judged = _evidence(proven)
    assert judged.reasons == () and judged.run == tip
    assert not any("fetched from" in note for note in judged.notes)
    (note,) = [n for n in judged.notes if "is ignored" in n]
    assert note.startswith(f"origin's copy of {MIRROR} is ignored: "), note


def test_a_step_that_runs_on_a_label_needs_a_runner_carrying_it(world: World) -> None:
    """ci carries no label: its full run proves `unit`, not `lint`, which must run on linux."""
    lint = step("lint", check("true"))
    lint["runs_on"] = ["linux"]
    world.seal(plan(step("unit", check("true")), lint))
    world.run()
    assert _evidence(world).reasons == (
        Reason(
            "evidence.runner-label",
            "step lint has no evidence from a runner labelled linux",
            "`git audit run --step lint --label linux --plan default` on such a runner, then "
            "push its evidence",
            "lint",
            Verdict.UNKNOWN,
        ),
    )
    # a runner the trust set labels linux runs lint: composed with ci's run, the plan is proven
    builder = runner(world, "builder", frozenset({"linux"}))
    world.run(signer=builder, targets=["lint"], labels=["linux"])
    assert _evidence(world).reasons == ()


def test_an_older_run_that_cannot_be_read_stops_the_composition(world: World) -> None:
    """lint must run on a linux runner, so the gate composes the runs of the tree. One older
    run, signed by ci and carrying the tree's trailers, has no run.json: on the plan's own
    ledger that is damage, named, with the way out."""
    lint = step("lint", check("true"))
    lint["runs_on"] = ["linux"]
    world.seal(plan(step("unit", check("true")), lint))
    world.run()
    tip = world.ref(RUNS)
    assert tip is not None
    git = world.handle().git
    honest = git[pygit2.Oid(hex=tip)].peel(pygit2.Commit)
    files = {k: v for k, v in world.run_files(tip).items() if k != "run.json"}
    damaged = world.commit_object(
        git, write_tree(git, files), [honest.id], honest.message, world.ci
    )
    newer = world.commit_object(git, honest.tree_id, [damaged], honest.message, world.ci)
    world.set_ref(RUNS, newer)
    (reason,) = _evidence(world).reasons
    assert reason == Reason(
        "evidence.ledger", f"run {str(damaged)[:12]} has no run.json", "restore the runs ref"
    )


def test_a_pushed_run_carrying_a_step_is_traced_through_git(sealed: World) -> None:
    """pre-receive judges a pushed runs ref whose newest run carries `unit` from the run below
    it. The pushed run is not in the lookup cache, so git itself says whether the source is an
    earlier run of the pushed chain: it is, so unit is proven; a source on no chain the push
    reaches is not."""
    sealed.run()
    tip = sealed.ref(RUNS)
    assert tip is not None

    def carried_from(source: str) -> Callable[[dict[str, Any]], None]:
        def edit(doc: dict[str, Any]) -> None:
            doc["steps"]["unit"].update(status="carried", carried_from=source)

        return edit

    pushed = sealed.forge_run(tip, edit=carried_from(tip), signer=sealed.ci, move=False)
    judged = _evidence(sealed, pushed)
    assert judged.reasons == () and judged.run == str(pushed)
    stray = sealed.forge_run(tip, signer=sealed.ci, parent=None, move=False)
    pushed = sealed.forge_run(tip, edit=carried_from(str(stray)), signer=sealed.ci, move=False)
    (reason,) = _evidence(sealed, pushed).reasons
    assert (reason.code, reason.step) == ("evidence.carried-invalid", "unit")


def test_a_runs_ref_overwritten_with_a_blob_is_named(proven: World) -> None:
    """The plan's runs ref points at a blob: the gate names the ref and the object (FAIL), not
    "no evidence"."""
    repo = proven.handle()
    blob = repo.git.create_blob(b"not a commit\n")
    proven.set_ref(RUNS, str(blob))
    forget_marks(repo.gitdir)  # else: a rewind, reported first
    (reason,) = _evidence(proven).reasons
    assert (reason.code, reason.verdict) == ("evidence.ledger", Verdict.FAIL)
    assert reason.message == f"{RUNS} points at {str(blob)[:12]}, a blob, not a commit"


def test_the_only_run_for_the_tree_under_another_contract_is_stale_and_named(
    world: World,
) -> None:
    """The only run for the tree was made under another contract (what a run from before a
    reseal is to the gate; here ci signs one with another contract digest): UNKNOWN, the run
    named, and the way out; on the ledger of another plan it is a replay (FAIL)."""
    world.seal(plan(step("unit", check("true"))))
    honest = world.run()
    assert honest.commit is not None

    def other_contract(doc: dict[str, Any]) -> None:
        doc["contract_digest"] = "sha256:" + "0" * 64

    # the ledger then holds this run alone (as in a clone that never saw the honest one)
    forget_marks(world.handle().gitdir)
    forged = world.forge_run(honest.commit, edit=other_contract, signer=world.ci, parent=None)
    assert _evidence(world).reasons == (
        Reason(
            "evidence.stale-contract",
            f"the evidence for this tree ({str(forged)[:12]}) was made under another contract",
            "git audit run --plan default",
            None,
            Verdict.UNKNOWN,
        ),
    )

    def other_plan(doc: dict[str, Any]) -> None:
        other_contract(doc)
        doc["plan"] = "b"

    forget_marks(world.handle().gitdir)
    replayed = world.forge_run(honest.commit, edit=other_plan, signer=world.ci, parent=None)
    assert _evidence(world).reasons == (
        Reason(
            "evidence.replayed",
            f"run {str(replayed)[:12]} on the ledger of 'default' is evidence for another plan",
            "the ledger was tampered with; restore refs/audit/runs/default",
        ),
    )


def _source(commit: str, when: int, ledger: str = "default", run: str | None = None) -> Source:
    """A run *run* (default: its commit) signed at *when*, as carried by commit *commit*."""
    doc = {"run": run or commit}
    record = RunRecord(
        commit, when, "default", Verdict.PASS, (), "c", "t", None, None, None, None, {}, doc
    )
    return Source(record, ledger)


def test_runs_are_ordered_by_their_chains_before_their_clocks() -> None:
    """A run recorded after another on a ledger comes first whatever its signed time (a slow
    clock); runs on unrelated chains by signed time, the first ledger first on a tie; a run on
    two ledgers (or a copy a push signed again) once, ordered by both chains."""
    order = newest_first([[_source("f", 100), _source("p", 200)]])
    assert [s.record.commit for s in order] == ["f", "p"]
    # a copy of the ledger left at the older run, and another clone's run dated in between
    own = [_source("f", 100), _source("p", 200)]
    copy = [_source("p", 200, "mirror")]
    other = [_source("x", 150, "other")]
    order = newest_first([own, copy, other])
    assert [s.record.commit for s in order] == ["x", "f", "p"]
    assert order[2].ledger == "default"
    # another clone's ledger ahead of ours, its newer run signed by a slow clock
    ahead = [_source("n", 50, "mirror"), _source("f", 100, "mirror"), _source("p", 200, "mirror")]
    order = newest_first([own, ahead])
    assert [s.record.commit for s in order] == ["n", "f", "p"]
    tie = newest_first([[_source("a", 100)], [_source("b", 100, "mirror")]])
    assert [s.record.commit for s in tie] == ["a", "b"]
    # the PASS run as it was before a push signed it again ("p0", on no chain of ours) is "p"
    before = [_source("p0", 200, "laptop", run="p")]
    order = newest_first([own, before])
    assert [s.record.commit for s in order] == ["f", "p"]


def _entry(status: StepStatus, upstream: tuple[UpstreamEntry, ...] = ()) -> StepEntry:
    return StepEntry(status, "", "", None, 0, 0.0, None, (), {}, upstream, None, None, "checkout")


def _labelled_source(commit: str, when: int, entry: StepEntry) -> Source:
    record = RunRecord(
        commit, when, "default", Verdict.PASS, (), "c", "t", None, None, None, None,
        {"deploy": entry}, {"run": commit},
    )  # fmt: skip
    return Source(record, "default", frozenset({"linux"}))


@pytest.mark.parametrize(("outcome", "decides"), [("failed", "b"), ("unknown", "p")])
def test_a_labelled_step_blocked_by_a_broken_output_is_its_newest_outcome(
    outcome: str, decides: str
) -> None:
    """A linux runner's newest entry for `deploy` (runs_on linux) is blocked because an upstream
    output it re-checked did not hold: that is the step's outcome (a failure), as for a step
    without labels, and the older pass is not reached. An output check that timed out says
    nothing about the output (nor does a blocked entry without upstream checks): the older
    pass decides."""
    data = {
        "task": "t",
        "requirements": [{"id": "R", "description": "d", "priority": "must"}],
        "steps": [
            {"id": "deploy", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]}
            | {"runs_on": ["linux"]}
        ],
    }
    plan_, problems = load_plan(json.dumps(data).encode(), name="default", source="p")
    assert plan_ is not None, problems
    check_ = CheckEntry("c", outcome, "", 1, 0.0, 0, 0, False, False)
    up = UpstreamEntry("build", "bin", False, (check_,))
    blocked = _labelled_source("b", 200, _entry(StepStatus.BLOCKED, (up,)))
    passed = _labelled_source("p", 100, _entry(StepStatus.PASSED))
    ((proof,),) = prove(plan_, [blocked, passed]).values()
    assert proof.source is not None and proof.source.record.commit == decides, proof
    # without upstream checks, blocked means a prerequisite was not verified there: not decisive
    bare = _labelled_source("n", 200, _entry(StepStatus.BLOCKED))
    ((proof,),) = prove(plan_, [bare, passed]).values()
    assert proof.source is not None and proof.source.record.commit == "p"


def test_a_runner_agrees_only_in_its_own_word_where_a_rule_asks_several() -> None:
    """`tally`: ci's newest run passed; *own* says it carried a step from another runner's run.
    Where the rule asks 2 runners, ci does not agree (it is borrowed); where it asks 1, the
    content is judged from admitted runs alone and ci's pass counts."""
    from gitaudit.gate.runners import describe, tally
    from gitaudit.ledger.trust import EvidenceRule, TrustedKey

    data = {
        "task": "t",
        "requirements": [{"id": "R", "description": "d", "priority": "must"}],
        "steps": [{"id": "unit", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]}],
    }
    plan_, _ = load_plan(json.dumps(data).encode(), name="default", source="p")
    assert plan_ is not None
    ci = TrustedKey("ci", None, frozenset({"runner"}))  # type: ignore[arg-type]
    source = replace(_source("r", int(time.time())), signer=ci)
    for wanted, admitted, borrowed in ((2, set(), {"ci"}), (1, {"ci"}, set())):
        rule = EvidenceRule("refs/heads/main", ("ci", "ci2"), wanted)
        got = tally(plan_, rule, [source], time.time(), lambda _signer, _record: False)
        assert (set(got[0]), set(got[3])) == (admitted, borrowed)
        if borrowed:
            text = describe(rule, "refs/heads/main", got[0], got[1], got[3])
            assert "the passing runs by ci carried steps another runner executed" in text
    rule = EvidenceRule("refs/heads/main", ("ci", "ci2"), 2)
    got = tally(plan_, rule, [source], time.time(), lambda _signer, _record: True)
    assert set(got[0]) == {"ci"} and not got[3]


def test_a_runners_word_is_no_fresher_than_the_runs_it_carried_from() -> None:
    """`word_expires`: a passing run's word on its tree expires with the earliest step with
    `valid_for`, counted from the run that executed it: the run itself, or for a carried step the
    run it came from (one that cannot be read: expired). A carried step without `valid_for` never
    expires, however old its source."""
    from gitaudit.gate.runners import word_expires

    data = {
        "task": "t",
        "requirements": [{"id": "R", "description": "d", "priority": "must"}],
        "steps": [
            {"id": "unit", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]}
            | {"valid_for": "10s"},
            {"id": "lint", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]},
        ],
    }
    plan_, _ = load_plan(json.dumps(data).encode(), name="default", source="p")
    assert plan_ is not None

    def run(commit: str, when: int, **steps: StepEntry) -> RunRecord:
        return RunRecord(
            commit, when, "default", Verdict.PASS, (), "c", "t", None, None, None, None,
            steps, {"run": commit},
        )  # fmt: skip

    def carried(source: str) -> StepEntry:
        return replace(_entry(StepStatus.CARRIED), carried_from=source)

    old = run("old", 100, unit=_entry(StepStatus.PASSED), lint=_entry(StepStatus.PASSED))
    runs = {"old": old, "ancient": run("ancient", 1)}
    read = runs.get
    executed = run("new", 200, unit=_entry(StepStatus.PASSED), lint=carried("ancient"))
    assert word_expires(plan_, executed, read) == 210.0
    carrying = run("new", 200, unit=carried("old"), lint=_entry(StepStatus.PASSED))
    assert word_expires(plan_, carrying, read) == 110.0
    lost = run("new", 200, unit=carried("gone"), lint=_entry(StepStatus.PASSED))
    assert word_expires(plan_, lost, read) == float("-inf")
    dated_ahead = run("ahead", 10**9, unit=_entry(StepStatus.PASSED))
    runs["ahead"] = dated_ahead
    assert word_expires(plan_, run("new", 200, unit=carried("ahead")), read) == 210.0


def test_a_runner_whose_run_is_dated_ahead_does_not_agree() -> None:
    """`tally`: a passing run signed further ahead of this clock than the tolerated skew would
    stay fresh too long: its runner does not agree (60 s ahead, within the skew, it does). A plan
    without `valid_for` never expires, and the run's time does not matter."""
    from gitaudit.gate.runners import tally
    from gitaudit.ledger.records import CLOCK_SKEW
    from gitaudit.ledger.trust import EvidenceRule, TrustedKey

    def plan_with(**extra: str) -> Any:
        data = {
            "task": "t",
            "requirements": [{"id": "R", "description": "d", "priority": "must"}],
            "steps": [
                {"id": "unit", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]}
                | extra
            ],
        }
        loaded, _ = load_plan(json.dumps(data).encode(), name="default", source="p")
        assert loaded is not None
        return loaded

    ci = TrustedKey("ci", None, frozenset({"runner"}))  # type: ignore[arg-type]
    rule = EvidenceRule("refs/heads/main", ("ci",), 1)
    now = time.time()
    for plan_, ahead, agrees in (
        (plan_with(valid_for="1h"), CLOCK_SKEW + 60, False),
        (plan_with(valid_for="1h"), 60, True),
        (plan_with(), 86400, True),
    ):
        source = replace(_source("r", int(now) + ahead), signer=ci)
        got = tally(plan_, rule, [source], now, lambda _signer, _record: True)
        assert (set(got[0]) == {"ci"}) is agrees, (ahead, got)
