"""Attacks on the plans: the definition of done itself."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitaudit.errors import PlanError, TrustError
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.seals import reset_attempts, retire_plan
from tests.adversarial.conftest import (
    STRICT,
    World,
    assert_plan,
    assert_plans_level,
    check,
    only,
    plan,
    step,
)
from tests.adversarial.test_request import PLAN, R1, R2, Asked, answering, refused
from tests.adversarial.test_request import asked as asked  # noqa: PLC0414 (re-exported fixture)
from tests.e2e.conftest import Setup
from tests.e2e.conftest import setup as setup  # noqa: PLC0414 (re-exported fixture)


def test_attack_plans_edited_after_sealing(proven: World) -> None:
    """The agent quietly replaces a check by `true` in the committed plan."""
    edited = json.loads(json.dumps(STRICT))
    edited["steps"][0]["verify"] = [check("sh", "-c", "exit 0")]
    proven.write_plan(edited)
    proven.repo.commit("make the check easier")
    judged = assert_plan(proven.gate(), "plan.differs-from-seal", "FAIL")
    assert "differs from its seal v1" in judged.reasons[0].message
    status = proven.cli("status", "HEAD", "--json")
    assert status.code == 1, status.err
    assert status.json()["plans"][0]["reasons"][0]["code"] == "plan.differs-from-seal"


def test_attack_plans_weakened_by_reseal_without_allow_weaken(sealed: World) -> None:
    """Dropping a step and resealing is refused without --allow-weaken; the ref does not move."""
    before = sealed.ref(PLANS_REF)
    weaker = plan(step("unit", check("true")))
    sealed.write_plan(weaker)
    sealed.repo.commit("drop the lint step")
    result = sealed.cli("plan", "seal", "--plan", "default", "--key", str(sealed.keys["alice"]))
    assert result.code == 1, result.out + result.err
    assert "would be weakened" in result.err and "--allow-weaken" in result.err
    assert sealed.ref(PLANS_REF) == before
    assert_plan(sealed.gate(), "plan.differs-from-seal", "FAIL")


def test_attack_plans_retired_by_a_runner_key(proven: World) -> None:
    """A runner (not a sealer) signs a commit retiring the strict plan."""
    with pytest.raises(TrustError, match="is not a sealer"):
        retire_plan(proven.handle(), proven.ci, "default", "not needed")
    files = proven.plans_files()
    seal = json.loads(files["seals/default.json"])
    seal.update(version=seal["version"] + 1, retired=True, change="retired", weakened=True)
    files["seals/default.json"] = dumps(seal)
    del files["plans/default.json"]
    proven.forge_plans(files, proven.ci)
    (proven.path / ".gitaudit/plans/default.json").unlink()
    proven.repo.commit("the plan is retired, honest")
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "not signed by a trusted sealer" in result.reasons[0].message


def test_attack_plans_file_deleted(proven: World) -> None:
    """Deleting the plan file does not retire the plan."""
    proven.repo.git("rm", "-q", ".gitaudit/plans/default.json")
    proven.repo.commit("no plan, no problem")
    judged = assert_plan(proven.gate(), "plan.missing", "FAIL")
    assert "sealed as active" in judged.reasons[0].message


def test_attack_plans_lenient_named_plan_beside_the_strict_one(proven: World) -> None:
    """A lenient, unsealed plan added beside the strict one cannot make the aggregate PASS,
    even while the strict plan itself has PASS evidence for the tree."""
    proven.write_plan(plan(step("nothing", check("true"))), "lenient")
    proven.repo.commit("a plan I like better")
    assert proven.run().verdict == "PASS"
    result = proven.gate()
    assert only(result, "default").verdict == "PASS"
    lenient = only(result, "lenient")
    assert lenient.verdict == "FAIL"
    assert [r.code for r in lenient.reasons] == ["plan.unsealed"]
    assert result.verdict == "FAIL"


def test_attack_plans_invalid_json_committed(proven: World) -> None:
    """A plan file that is not JSON at all (so nothing could be compared with the seal)."""
    proven.repo.write(".gitaudit/plans/default.json", '{"task": "x", "steps": [\n')
    proven.repo.commit("oops")
    assert_plan(proven.gate(), "plan.invalid", "FAIL")


@pytest.mark.parametrize("forgery", ["copied", "invented", "linked"])
def test_attack_plans_schema_check_skipped_by_forged_marks(proven: World, forgery: str) -> None:
    """The gate skips the schema check for plan bytes it marked schema-valid before
    (gitaudit/plan/known_valid.py). The agent commits a plan that breaks the schema and makes
    the marks list vouch for it: the sealed plan's own mark copied onto the list, made-up marks,
    or the list replaced by a link to a file of its own. Each mark is a MAC of exactly one
    file's bytes under the local key, so the edited plan is checked in full."""
    marks = proven.path / ".git" / "gitaudit" / "valid-plans"
    assert only(proven.gate()).verdict == "PASS"
    sealed_marks = marks.read_text()
    assert len(sealed_marks.split()) == 1  # the gate marked the sealed plan
    edited = json.loads(json.dumps(STRICT))
    edited["steps"][0]["verify"][0]["shell"] = "yes, please"  # no such field
    proven.write_plan(edited)
    proven.repo.commit("a plan the schema refuses")
    if forgery == "copied":
        marks.write_text(sealed_marks * 3)
    elif forgery == "invented":
        marks.write_text("".join(f"{i:064x}\n" for i in range(40)))
    else:
        own = proven.path.parent / "marks"
        own.write_text(sealed_marks)
        marks.unlink()
        marks.symlink_to(own)
    judged = assert_plan(proven.gate(), "plan.invalid", "FAIL")
    assert "shell" in judged.reasons[0].message
    status = proven.cli("status", "HEAD", "--json")
    assert status.code == 1, status.err
    assert status.json()["plans"][0]["reasons"][0]["code"] == "plan.invalid"


def _commit_all(setup: Setup, message: str) -> subprocess.CompletedProcess[str]:
    """`git add -A` and `git commit` in the client, with its hooks (commit-msg among them)."""
    setup.client.git("add", "-A")
    return subprocess.run(
        ["git", "commit", "-q", "-m", message],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=setup.env(),
        check=False,
    )


@pytest.mark.parametrize("edit", ["deleted", "moved", "broken", "requirement renamed"])
def test_attack_plans_edited_in_the_commit_to_hide_a_claim(setup: Setup, edit: str) -> None:
    """The commit-msg hook refuses a completion claim ("Fixes: REQ-2") on a tree the gate does
    not PASS, and knew a requirement id only from the plan files of the staged tree. The agent
    breaks the greeting and, in the same commit, deletes the plan file, moves it into a
    subfolder, breaks its JSON, or renames REQ-2 in it: the gate FAILs that tree, but the claim
    named no requirement any more, so the commit went through. The sealed plans' requirements
    (and the sealed requests') now count whatever the commit does to the plan files."""
    plan_file = setup.client.path / ".gitaudit/plans/default.json"
    setup.client.write("greeting.txt", "goodbye\n")
    if edit == "deleted":
        plan_file.unlink()
    elif edit == "moved":
        (plan_file.parent / "old").mkdir()
        plan_file.rename(plan_file.parent / "old" / "default.json")
    elif edit == "broken":
        plan_file.write_text("{")
    else:
        edited = json.loads(plan_file.read_text())
        edited["requirements"][1]["id"] = "REQ-2b"
        edited["steps"][1]["covers"] = ["REQ-2b"]
        plan_file.write_text(json.dumps(edited))
    head = setup.client.git("rev-parse", "HEAD").strip()
    committed = _commit_all(setup, "finish\n\nFixes: REQ-2")
    assert committed.returncode == 1, committed.stderr
    assert "it claims completion ('Fixes: REQ-2') is blocked: the gate says FAIL" in (
        committed.stderr
    )
    assert setup.client.git("rev-parse", "HEAD").strip() == head
    unclaimed = _commit_all(setup, "work in progress")  # no claim: commit-msg lets it through
    assert unclaimed.returncode == 0, unclaimed.stderr


@pytest.mark.parametrize("carry", ["inputs unchanged", "targeted run of another step"])
def test_attack_plans_expired_evidence_carried_by_the_run(world: World, carry: str) -> None:
    """`attestation` declares `valid_for: 6s`: its evidence counts for six seconds after the
    signed time of the run that executed it (whole seconds: a commit's time). Seven seconds later
    the gate says UNKNOWN
    (`evidence.expired`); `git audit run` carried that pass on, because the attestation's
    inputs were unchanged, or because a run targeting `unit` alone carries the other steps
    verified earlier for the tree, and the run said PASS (exit 0) on evidence the plan says has
    expired, forever. A pass older than its step's `valid_for` is no longer carried: the step
    executes again (or, not targeted, is not run and the run is UNKNOWN)."""
    world.repo.write("src/app.txt", "app\n")
    world.seal(
        plan(
            step("unit", check("true")),
            step("attestation", check("true"), valid_for="6s", inputs=["src/**"]),
        )
    )
    first = world.run()
    assert first.verdict == "PASS", first.doc
    # 6 s: the run and the gate after it (on a loaded machine) stay well inside the renewed
    # evidence's validity, which the commit's whole-second time shortens by up to a second (at
    # 1 s the check after the second run was flaky in CI)
    time.sleep(7.1)
    judged = assert_plan(world.gate(), "evidence.expired", "UNKNOWN")
    assert judged.reasons[0].step == "attestation"
    if carry == "inputs unchanged":
        again = world.run()
        entry = again.doc["steps"]["attestation"]
        assert (entry["status"], entry["carried_from"]) == ("passed", None), entry
        assert again.verdict == "PASS"
        assert only(world.gate()).verdict == "PASS"
    else:
        again = world.run(targets=["unit"])
        entry = again.doc["steps"]["attestation"]
        assert (entry["status"], entry["carried_from"]) == ("not-run", None), entry
        assert again.verdict == "UNKNOWN", again.doc
        assert_plan(world.gate(), "evidence.expired", "UNKNOWN")  # composed: the older run


FLAKY = step("flaky", check("sh", "-c", "test $(cat flaky.txt) = 1"), covers=["R1"], max_attempts=2)


@pytest.mark.parametrize("change", ["retitled", "cost", "own requirement", "twice"])
def test_attack_plans_planner_reseal_restarts_failed_attempts(asked: Asked, change: str) -> None:
    """The agent's planner key sealed a step `flaky` with `max_attempts: 2`; it failed twice and
    is exhausted. Raising max_attempts is a weakening a planner may not seal, and resetting the
    attempts is a sealer's word; but failed attempts were counted under the sealed contract
    alone, so the planner resealed with a change that weakens nothing (a new title, another
    cost, a requirement of its own, or two such reseals) and the exhausted step was run again,
    unforced, and PASSed. Failures now count across a planner's reseals, back to the newest
    seal a sealer made; a sealer's reset still lets the step be tried again."""
    world = asked.world
    world.repo.write("flaky.txt", "0\n")
    base = copy.deepcopy(PLAN["steps"])
    assert asked.seal(answering(*base, FLAKY)).commit is not None
    world.repo.commit("a step of the planner's own")
    for _ in range(2):
        assert world.run().doc["steps"]["flaky"]["status"] == "failed"
    assert world.run().doc["steps"]["flaky"]["status"] == "exhausted"
    mine = {"id": "MINE", "description": "mine", "priority": "must"}
    versions = {
        "retitled": [answering(*base, {**FLAKY, "title": "flaky, renamed"})],
        "cost": [answering(*base, {**FLAKY, "cost": 2})],
        "own requirement": [
            answering(*base, {**FLAKY, "covers": ["R1", "MINE"]}, requirements=[R1, R2, mine])
        ],
        "twice": [
            answering(*base, {**FLAKY, "title": "flaky, renamed"}),
            answering(*base, {**FLAKY, "title": "flaky, renamed", "cost": 2}),
        ],
    }[change]
    for version in versions:
        outcome = asked.seal(version)
        assert outcome.record is not None and outcome.record.sealer == "agent"
        assert not outcome.record.weakened
    world.repo.write("flaky.txt", "1\n")  # the flake passes now
    world.repo.commit("resealed, and lucky")
    again = world.run()
    assert again.doc["steps"]["flaky"]["status"] == "exhausted", again.doc
    assert_plan(world.gate(), "step.exhausted", "FAIL")
    forced = world.run(force=True)
    assert forced.doc["steps"]["flaky"]["status"] == "passed"
    assert_plan(world.gate(), "evidence.forced-past-exhaustion", "FAIL")
    reset = reset_attempts(world.handle(), world.alice, "default", "flaky", "flaky infra")
    assert reset.count == 2
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"


SEALED_CHECKS = [
    {"type": "regex", "path": "greeting.txt", "pattern": "^Hello, world$"},
    check("python3", "greet.py", expect_exit=0, output_regex="^Hello$", timeout=30),
]
LOOSER: dict[str, tuple[int, dict[str, Any]]] = {
    "pattern-unanchored": (0, {"pattern": "Hello"}),
    "pattern-anything": (0, {"pattern": ".*"}),
    "output-regex-unanchored": (1, {"output_regex": "Hello"}),
    "output-regex-dropped": (1, {"output_regex": None}),
    "expect-exit-changed": (1, {"expect_exit": 1}),
    "timeout-raised": (1, {"timeout": 3000}),
    "env-added": (1, {"env": {"GREETING": "Hello"}}),
    "program-by-path": (1, {"argv": ["/usr/bin/env", "python3", "greet.py"]}),
}


@pytest.mark.parametrize("change", sorted(LOOSER))
def test_attack_plans_check_loosened_in_place(world: World, change: str) -> None:
    """A sealed check is loosened in place, its type and path kept: a regex that matches more
    (unanchored, `.*`), an output regex unanchored or dropped, another expected exit code, a
    longer timeout, an environment variable added, the program reached through another path.
    Each is a changed check, so a weakening: refused without --allow-weaken, the ref kept."""
    world.repo.write("greeting.txt", "Hello, world\n")
    world.repo.write("greet.py", "print('Hello')\n")
    world.seal(plan(step("unit", *SEALED_CHECKS)))
    before = world.ref(PLANS_REF)
    index, edit = LOOSER[change]
    loosened = copy.deepcopy(SEALED_CHECKS)
    loosened[index].update(edit)
    loosened[index] = {k: v for k, v in loosened[index].items() if v is not None}
    world.write_plan(plan(step("unit", *loosened)))
    world.repo.commit(f"loosen: {change}")
    result = world.cli("plan", "seal", "--plan", "default", "--key", str(world.keys["alice"]))
    assert result.code == 1, result.out + result.err
    assert "would be weakened" in result.err and "check removed or changed" in result.err
    assert world.ref(PLANS_REF) == before
    assert_plan(world.gate(), "plan.differs-from-seal", "FAIL")


# variant -> how the agent edits the work tree's copy of the sealed plan (left uncommitted)
def _free_lint(doc: dict[str, Any]) -> None:
    doc["steps"][1].update(depends_on=[], requires_outputs=[])


def _drop_unit(doc: dict[str, Any]) -> None:
    _free_lint(doc)
    del doc["steps"][0]


MISSION_EDITS: dict[str, Any] = {
    "the failing step dropped": _drop_unit,
    "its dependant's clause dropped": _free_lint,
    "its cost zeroed": lambda doc: doc["steps"][0].update(cost=0),
}


@pytest.mark.parametrize("edit", sorted(MISSION_EDITS))
@pytest.mark.parametrize("command", ["next", "route"])
def test_attack_plans_mission_answers_from_an_edited_plan(
    world: World, command: str, edit: str
) -> None:
    """`unit` failed, so `lint` (after it) is blocked and nothing proves the plan. The agent
    edits the work tree's plan file (not the seal) so that `next` and `route` would plan from
    its own graph: unit dropped, lint freed of it, unit made free. The mission commands read the
    plan file of the work tree but the step states of the gate, which judges that file against
    the seal: they refuse to plan from a plan that is not the sealed one, in one line naming the
    difference, instead of an answer (ready, cost 0, everything verified) that the gate would
    contradict."""
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    needs = [{"step": "unit", "name": "o"}]
    world.seal(
        plan(
            step("unit", check("false"), outputs=out),
            step("lint", deps=["unit"], requires_outputs=needs),
        )
    )
    assert world.run().verdict == "FAIL"
    edited = json.loads((world.path / ".gitaudit/plans/default.json").read_text())
    MISSION_EDITS[edit](edited)
    world.write_plan(edited)
    result = world.cli(command)
    assert result.code == 2, result.out + result.err  # a usage error: nothing was planned
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 2, result.err
    assert lines[0] == "error: plan 'default' in this tree differs from its seal v1", lines
    assert lines[1].startswith("hint: "), lines
    assert_plan(world.gate(None), "plan.differs-from-seal", "FAIL")


# variant -> (the progress line on which the run is stopped, the run's options)
INTERRUPTED_AT: dict[str, tuple[str, tuple[str, ...]]] = {
    "after its dependant passed": ("b passed", ()),
    "before its dependant started": ("a passed", ("--jobs", "1")),
}


@pytest.mark.usefixtures("sigint_delivered")
@pytest.mark.parametrize("variant", sorted(INTERRUPTED_AT))
def test_attack_plans_mission_counts_the_passes_of_an_interrupted_run(
    world: World, tmp_path: Path, variant: str
) -> None:
    """`a` (whose output `b` needs) and `slow` start; ci's run is stopped with Ctrl-C once a
    passed (with b passed too, or not started yet) while slow still runs: the run is recorded
    as INTERRUPTED, and a pass in it proves nothing (the gate composes no PASS from it, a run
    does not carry it). `next` and `route` took the gate's states, in which every step the
    interrupted run passed was `verified`: a (and b) verified, b "ready" on a proven only
    there, the remaining route slow alone at cost 1 (all four before the fix); `git audit run
    slow` then left a and b not run and the gate said UNKNOWN. A pass of an unsound run is now
    `pending`: a is ready, b waits for it, the route runs every step."""
    release = tmp_path / "release"  # slow waits for it
    wait = f"while [ ! -e {release} ]; do sleep 0.01; done"
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    world.seal(
        plan(
            step("a", outputs=out),
            step("slow", check("sh", "-c", wait)),
            step("b", deps=["a"], requires_outputs=[{"step": "a", "name": "o"}]),
        )
    )
    line, options = INTERRUPTED_AT[variant]
    key = ("--key", str(world.keys["ci"]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitaudit", "run", *key, *options],
        cwd=world.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GITAUDIT_PROGRESS_SECONDS": "0"},
    )
    assert proc.stderr is not None
    for progress in proc.stderr:
        if line in progress:
            proc.send_signal(signal.SIGINT)
            break
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "default: INTERRUPTED" in stdout, stdout + stderr
    assert world.gate().verdict == "UNKNOWN"
    nxt = world.cli("next", "--json").json()["plans"][0]
    assert nxt["verified"] == [], nxt
    assert nxt["ready"] == ["a", "slow"], nxt
    assert [b["step"] for b in nxt["blocked"]] == ["b"], nxt
    route = world.cli("route", "--json").json()["plans"][0]
    assert set(route["routes"][0]["steps"]) == {"a", "b", "slow"}, route
    # what the mission commands said before is what the run and the gate contradict
    release.touch()
    assert world.cli("run", "slow", *key).code == 3
    judged = only(world.gate())
    assert judged.verdict == "UNKNOWN", judged
    assert "evidence.interrupted" in [r.code for r in judged.reasons], judged.reasons


BUILD = check("sh", "build.sh")  # unfinished: writes no report
PLANT = check("sh", "-c", "mkdir -p build && echo ok > build/report.txt")
REPORT = {"type": "regex", "path": "build/report.txt", "pattern": "^ok$"}
REPORT_OUTPUT = [{"name": "report", "verify": [REPORT]}]

# variant -> (report's sealed verify and outputs, the verify and outputs the agent reseals)
PLANTED: dict[str, tuple[tuple[list[Any], list[Any]], tuple[list[Any], list[Any]]]] = {
    "between the sealed checks": (([BUILD, REPORT], []), ([BUILD, PLANT, REPORT], [])),
    "before every sealed check": (([BUILD, REPORT], []), ([PLANT, BUILD, REPORT], [])),
    "last in verify, before the output check": (
        ([BUILD], REPORT_OUTPUT),
        ([BUILD, PLANT], REPORT_OUTPUT),
    ),
    "in an output listed before the sealed one": (
        ([BUILD], REPORT_OUTPUT),
        ([BUILD], [{"name": "seed", "verify": [PLANT]}, *REPORT_OUTPUT]),
    ),
}


@pytest.mark.parametrize("variant", sorted(PLANTED))
def test_attack_plans_check_added_to_plant_what_sealed_checks_read(
    asked: Asked, variant: str
) -> None:
    """The agent's planner key sealed a step `report`: build.sh must write build/report.txt
    (ignored by git) saying ok. The build is unfinished, so the step fails. The agent reseals it
    with one check added, a program that writes the report itself, placed where it runs before
    the sealed check that reads it (between the sealed checks, first, last in verify before the
    output check, in an output listed first). Checks were compared as multisets, so an added
    check was a strengthening a planner may seal, and the next honest run and the gate said PASS
    (all four before the fix). A step's checks run one after another in one checkout: a program
    added before a sealed check, or sealed checks reordered, is a weakening only a sealer seals."""
    world = asked.world
    world.repo.write(".gitignore", "build/\n")
    world.repo.write("build.sh", "mkdir -p build\n")
    (verify, outputs), (new_verify, new_outputs) = PLANTED[variant]
    sealed = step("report", *verify, covers=["R1"], outputs=outputs)
    assert asked.seal(answering(*PLAN["steps"], sealed)).commit is not None
    world.repo.commit("a step builds the report")
    assert world.run().doc["steps"]["report"]["status"] == "failed"
    planted = step("report", *new_verify, covers=["R1"], outputs=new_outputs)
    refused(asked, answering(*PLAN["steps"], planted), "check added before sealed checks")
    world.repo.commit("a check that writes the report")
    assert_plan(world.gate(), "plan.differs-from-seal", "FAIL")


DEFAULT_REPORT = check("sh", "-c", "mkdir -p build && echo ok > build/report.txt")
NEEDS = [{"step": "defaults", "name": "placeholder"}, {"step": "generate", "name": "report"}]
# variant -> report's requires_outputs as the agent rewrites them in the plan file
UPSTREAM_ORDER: dict[str, list[dict[str, str]]] = {
    "reversed": NEEDS[::-1],
    "the first repeated last": [*NEEDS, NEEDS[0]],
    "the first repeated, reversed": [NEEDS[1], NEEDS[0], NEEDS[1], NEEDS[0]],
}


@pytest.mark.parametrize("variant", sorted(UPSTREAM_ORDER))
def test_attack_plans_required_outputs_reordered_in_the_plan_file(
    world: World, variant: str
) -> None:
    """alice sealed `report`, which requires two upstream outputs: `defaults/placeholder` (a
    default report saying ok) and then `generate/report` (build.sh writes the real report,
    which says fail: the work is unfinished); the runner re-executes them right before
    report's check, in one checkout, so the generated report is what the check reads: FAIL.
    The contract sorts `requires_outputs` (and drops repeats), so the agent rewrites them in
    the committed plan file, reversed or with the placeholder repeated last: the digest is the
    sealed one, no reseal is needed, and the runner re-executed them in the file's order: the
    placeholder overwrote the generated report, and the run and the gate said PASS (all three
    before the fix). Upstream outputs are re-executed in the contract's order, each once: FAIL."""
    world.repo.write(".gitignore", "build/\n")
    world.repo.write("build.sh", "mkdir -p build && echo fail > build/report.txt\n")
    sealed = plan(
        step("defaults", outputs=[{"name": "placeholder", "verify": [DEFAULT_REPORT]}]),
        step("generate", outputs=[{"name": "report", "verify": [check("sh", "build.sh")]}]),
        step(
            "report", check("true"), REPORT, deps=["defaults", "generate"], requires_outputs=NEEDS
        ),
    )
    world.seal(sealed)
    assert world.run().doc["steps"]["report"]["status"] == "failed"
    edited = copy.deepcopy(sealed)
    edited["steps"][2]["requires_outputs"] = UPSTREAM_ORDER[variant]
    world.write_plan(edited)
    world.repo.commit("the same contract, another order")
    run = world.run()
    assert run.doc["steps"]["report"]["status"] == "failed", run.doc["steps"]["report"]
    upstream = [(u["step"], u["output"]) for u in run.doc["steps"]["report"]["upstream"]]
    assert upstream == [("defaults", "placeholder"), ("generate", "report")]
    assert only(world.gate()).verdict == "FAIL"


READS_REPORT = check("grep", "-qx", "ok", "build/report.txt")
# variant -> (the sealed plan's own ignored paths, those the agent's new step declares)
OPENED: dict[str, tuple[list[str], list[str]]] = {
    "the folder": ([], ["build"]),
    "the file itself": ([], ["build/report.txt"]),
    "beside a path the plan opened": ([".cache"], ["build"]),
}


@pytest.mark.parametrize("variant", sorted(OPENED))
def test_attack_plans_new_step_opens_an_ignored_path_to_sealed_steps(
    asked: Asked, variant: str
) -> None:
    """The agent's planner key sealed `report`: build.sh must write build/report.txt (ignored
    by git) saying ok, and `grep` reads it; the build is unfinished, so the step fails. The agent
    writes build/report.txt in its work tree and reseals the plan with only a new step added,
    `cache`, which checks `true` and declares `build` (or the report file) in its own
    `ignored_paths`. The run links every declared ignored path, the plan's and each step's, into
    the one checkout all steps run in, so report's sealed check read the agent's file; compare
    looked at ignored paths only of steps on both sides, ranked the new step a strengthening
    the planner may seal, and the run and the gate said PASS (all three before the fix). An
    ignored path a new step declares that the sealed contract did not is a weakening: the
    planner's seal is refused, a sealer needs `--allow-weaken --reason`."""
    world = asked.world
    sealed_paths, opened = OPENED[variant]
    world.repo.write(".gitignore", "build/\n.cache/\n")
    world.repo.write("build.sh", "mkdir -p build\n")
    (world.path / ".cache").mkdir()
    report = step("report", check("sh", "build.sh"), READS_REPORT, covers=["R1"])
    data = answering(*PLAN["steps"], report)
    if sealed_paths:  # opening .cache/ is alice's call (a weakening of the fixture's plan)
        data["ignored_paths"] = sealed_paths
        world.write_plan(data)
        assert world.seal(commit=False, reason="the cache", allow_weaken=True).commit is not None
    else:
        assert asked.seal(data).commit is not None
    world.repo.commit("a step builds the report")
    assert world.run().doc["steps"]["report"]["status"] == "failed"
    world.repo.write("build/report.txt", "ok\n")
    cache = step("cache", check("true"), covers=["R1"], ignored_paths=opened)
    widened = copy.deepcopy(data)
    widened["steps"].append(cache)
    refused(asked, widened, f"ignored_paths: now also {opened[0]}")
    world.repo.commit("a cache step")
    assert_plan(world.gate(), "plan.differs-from-seal", "FAIL")


@pytest.mark.parametrize("name", ["..", ".", ".git", ".GIT", ".git.", "git~1", ".git::$DATA"])
def test_attack_plans_output_name_the_run_cannot_store(asked: Asked, name: str) -> None:
    """The agent's planner key reseals `unit` with one output added (a strengthening a planner
    may seal) whose name a git tree cannot hold: `..`, `.`, or `.git` as git spells it on
    Windows. The run stores each output's results under `steps/unit/outputs/<name>/`, so every
    later run executed every check (a deployment's too) and then recorded nothing ("refusing to
    store the unsafe path", libgit2's "invalid name for a tree entry"): no evidence for any tree
    until a sealer resealed (before the fix; a sealer's own seal of such a name likewise). The
    name is now refused where the plan is validated (`output.name-unstorable`): the seal is
    refused, and the committed plan is invalid at the gate."""
    world = asked.world
    world.repo.write("a.txt", "made\n")
    made = [{"name": name, "verify": [{"type": "file_exists", "path": "a.txt"}]}]
    unit = step("unit", check("true"), covers=["R1"], outputs=made)
    before = asked.plans_tip()
    with pytest.raises(PlanError, match=r"output\.name-unstorable"):
        asked.seal(answering(unit, PLAN["steps"][1]))
    assert asked.plans_tip() == before
    world.repo.commit("an output named as no tree can hold")
    judged = assert_plan(world.gate(), "plan.invalid", "FAIL")
    assert "[output.name-unstorable]" in judged.reasons[0].message


def test_plans_control_plain_output_names_are_stored(world: World) -> None:
    """Control: output names beside the refused ones (`...`, `.gitignore`, `git~2`) are sealed,
    and their results are stored in the run's tree as written."""
    world.repo.write("a.txt", "made\n")
    names = ["...", ".gitignore", "git~2", "a.git"]
    made = [{"name": n, "verify": [{"type": "file_exists", "path": "a.txt"}]} for n in names]
    world.seal(plan(step("unit", check("true"), outputs=made)))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    files = world.run_files(recorded.commit)
    assert all(f"steps/unit/outputs/{n}/0/result.json" in files for n in names)
    assert world.gate().verdict == "PASS"
