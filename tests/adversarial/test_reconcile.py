"""Attacks on reconciliation: settling an unknown outcome by someone's word is authority.

`deploy` is non-idempotent: it timed out, so its outcome is unknown and it may not simply run
again. `git audit reconcile deploy --observed pass` would settle it by the caller's word, a way
to PASS without its verify checks. ci holds only a runner key: it may reconcile with
`--readback` (the step's readback checks run like any other check), never by observation; the
gate refuses an observation in a run commit not signed by a reconciler or a sealer, however the
commit was written; and a plan change that opens the way (a step made non-idempotent, readback
checks added or changed) is a weakening.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.errors import SealError
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import mirror_ref, runs_ref
from gitaudit.ledger.seals import reset_attempts, seal_plan, set_policy, trust_add
from gitaudit.ledger.trust import Policy
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import (
    World,
    assert_plan,
    assert_plans_level,
    check,
    edit_lookup_cache,
    plan,
    step,
)
from tests.adversarial.test_attempts import another_clone
from tests.adversarial.test_request import PLAN, Asked, answering
from tests.adversarial.test_request import asked as asked  # noqa: PLC0414 (fixture)
from tests.gitrepo import audit, git

RUNS = runs_ref("default")
READBACK = {"type": "file_exists", "path": "deployed.txt"}


def deploy_plan(**deploy: Any) -> dict[str, Any]:
    """deploy's effect lives outside the tree, in the work tree: it runs there (workspace: live)
    so its readback can observe it."""
    fields: dict[str, Any] = {
        "idempotent": False,
        "readback": [READBACK],
        "workspace": "live",
        **deploy,
    }
    return plan(step("deploy", check("sleep", "30", timeout=0.5), **fields), step("lint"))


@pytest.fixture
def pending(world: World) -> World:
    """`deploy_plan` sealed; ci's run timed out on deploy (its effect, deployed.txt, would live
    outside the audited tree), so its outcome is unknown and awaits reconciliation."""
    world.repo.write(".gitignore", "deployed.txt\n")
    world.seal(deploy_plan())
    recorded = world.run()
    assert recorded.verdict == "UNKNOWN" and recorded.doc["steps"]["deploy"]["status"] == "unknown"
    assert_plan(world.gate(), "step.unknown", "UNKNOWN")
    return world


def observed_pass(doc: dict[str, Any], mode: str = "pass") -> None:
    """What `reconcile --observed pass` writes: deploy passed by the caller's word."""
    doc["verdict"], doc["reasons"] = "PASS", []
    entry = doc["steps"]["deploy"]
    entry.update(status="passed", reason="reconciled: observed pass", attempt=None, checks=[])
    entry["reconciled"] = {"mode": mode, "note": "looked fine to me"}


def assert_refused_by_role(world: World, *args: str) -> None:
    tip = world.ref(RUNS)
    result = world.cli("reconcile", "deploy", *args, "--key", str(world.keys["ci"]))
    assert result.code == 1, result.out + result.err
    lines = result.err.splitlines()
    assert len(lines) == 2, result.err
    assert lines[0].startswith("error: key ci (") and "may not settle step deploy" in lines[0]
    assert "needs a reconciler or a sealer key" in lines[0]
    assert lines[1].startswith("hint: ") and "--readback" in lines[1] and "reconciler" in lines[1]
    assert world.ref(RUNS) == tip  # refused before anything ran: nothing recorded
    assert_plan(world.gate(), "step.unknown", "UNKNOWN")


def test_attack_reconcile_runner_observes_pass(pending: World) -> None:
    """ci, a runner, calls `git audit reconcile deploy --observed pass`."""
    assert_refused_by_role(pending, "--observed", "pass", "--note", "it is live, trust me")


def test_attack_reconcile_runner_observes_fail(pending: World) -> None:
    """ci calls `--observed fail`: settling the outcome frees the non-idempotent step to run
    again, which is the reconciler's call too."""
    assert_refused_by_role(pending, "--observed", "fail")


def test_attack_reconcile_written_by_hand_with_the_runner_key(pending: World) -> None:
    """ci's key signs, by hand, exactly the run commit `reconcile --observed pass` would write."""
    forged = pending.forge_run(str(pending.ref(RUNS)), edit=observed_pass, signer=pending.ci)
    judged = assert_plan(pending.gate(), "evidence.unauthorised-reconcile", "FAIL")
    assert judged.run == str(forged) and judged.reasons[0].step == "deploy"
    assert judged.reasons[0].message == (
        f"step deploy was settled as observed 'pass' in run {str(forged)[:12]}, signed by a key "
        "that is neither a reconciler nor a sealer"
    )
    assert judged.reasons[0].hint == (
        "only a reconciler or a sealer may settle an outcome by its word: have one check the "
        "step's effect, or run it again (`git audit run deploy --plan default`)"
    )


def test_attack_reconcile_written_by_hand_with_another_mode(pending: World) -> None:
    """The same forgery with a reconciled mode no command writes ('trust-me'): only `readback`
    counts without a reconciler's signature."""
    pending.forge_run(
        str(pending.ref(RUNS)), edit=lambda d: observed_pass(d, "trust-me"), signer=pending.ci
    )
    assert_plan(pending.gate(), "evidence.unauthorised-reconcile", "FAIL")


def test_attack_reconcile_laundered_by_an_honest_targeted_run(pending: World) -> None:
    """After ci's hand-written observation, an honest `git audit run lint` carries deploy from
    it: the carried step is only as good as the run it came from."""
    forged = pending.forge_run(str(pending.ref(RUNS)), edit=observed_pass, signer=pending.ci)
    honest = pending.run(targets=["lint"])
    assert honest.doc["steps"]["deploy"]["carried_from"] == str(forged)
    judged = assert_plan(pending.gate(), "evidence.unauthorised-reconcile", "FAIL")
    assert judged.run == honest.commit


def test_attack_reconcile_pushed_to_the_server(pending: World, tmp_path: Path) -> None:
    """The hand-written observation is pushed with the branch, skipping the client's hooks: the
    server's pre-receive judges with the same gate and declines the whole atomic push."""
    server = pending.serve(tmp_path / "server.git")
    pending.forge_run(str(pending.ref(RUNS)), edit=observed_pass, signer=pending.ci)
    result = subprocess.run(
        ["git", "push", "--no-verify", "--atomic", "origin", "main", f"{RUNS}:{RUNS}"],
        cwd=pending.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "pre-receive hook declined" in result.stderr
    assert "is blocked: the gate says FAIL" in result.stderr
    assert "neither a reconciler nor a sealer" in result.stderr, result.stderr
    for ref in ("refs/heads/main", RUNS):
        assert git(server, "rev-parse", "--verify", "-q", ref, check=False) == ""


def test_attack_reconcile_step_made_non_idempotent_in_a_hand_made_seal(pending: World) -> None:
    """alice signs a hand-made plans commit (v2) that makes `lint` non-idempotent without
    recording a weakening: the chain check classifies it as one and refuses the commit."""
    files = pending.plans_files()
    weaker = deploy_plan()
    weaker["steps"][1]["idempotent"] = False
    pending.write_plan(weaker)
    (checked,) = check_worktree(pending.path, "default")
    record = json.loads(files["seals/default.json"])
    record.update(contract_digest=checked.digest, version=2, change="strengthened")
    record["previous_digest"] = json.loads(files["seals/default.json"])["contract_digest"]
    files["seals/default.json"] = dumps(record)
    files["plans/default.json"] = checked.file.data
    pending.forge_plans(files, pending.alice)
    assert_plans_level(pending.gate(), "plans.untrusted")
    message = pending.gate().reasons[0].message
    assert "weakens the contract without recording it" in message, message


def test_attack_reconcile_readback_added_where_weakening_is_forbidden(world: World) -> None:
    """With `allow_weaken: false`, a reseal adding a readback check to a non-idempotent step (a
    way to settle it without its verify checks) is refused like any weakening."""
    world.seal(deploy_plan(readback=[]))
    set_policy(
        world.handle(), world.alice, Policy(allow_weaken=False), allow_weaken=False, reason=None
    )
    tip = read_state(world.handle()).tip
    with pytest.raises(SealError, match=r"readback check added: file_exists deployed\.txt"):
        world.seal(deploy_plan(), reason="observe the deployment", allow_weaken=True)
    assert read_state(world.handle()).tip == tip


def test_attack_reconcile_control_the_runner_reads_back(pending: World) -> None:
    """Control: ci may reconcile with `--readback`; the readback check ran and found the
    deployment, so the evidence counts."""
    (pending.path / "deployed.txt").write_text("v1\n")
    result = pending.cli("reconcile", "deploy", "--readback", "--key", str(pending.keys["ci"]))
    assert result.code == 0, result.out + result.err
    assert pending.gate().verdict == "PASS"


def test_attack_reconcile_control_a_reconciler_observes(pending: World) -> None:
    """Control: rita, trusted by alice as runner and reconciler, settles deploy by observation;
    the evidence counts."""
    rita = generate_key("rita").private_path
    public = load_signer(rita).public_key
    trust_add(pending.handle(), pending.alice, public, "runner", "rita")
    trust_add(pending.handle(), pending.alice, public, "reconciler", "rita")
    result = pending.cli("reconcile", "deploy", "--observed", "pass", "--key", str(rita))
    assert result.code == 0, result.out + result.err
    assert pending.gate().verdict == "PASS"


# ------------------------------------------------- the lookup cache forgets the unknown outcome


def _deploy(doc: dict[str, Any]) -> list[list[str]]:
    return next(kept for step, kept in doc["recent"] if step == "deploy")


def _removed(doc: dict[str, Any]) -> None:
    doc["recent"] = [[step, kept] for step, kept in doc["recent"] if step != "deploy"]


def _invented(doc: dict[str, Any]) -> None:
    executions = _deploy(doc)
    executions.insert(0, ["failed", "", executions[0][2]])


# variant -> (how the tallies are rewritten, SQL run on the cache)
FORGET_UNKNOWN: dict[str, tuple[Any, tuple[str, ...]]] = {
    "the outcome marked passed": (lambda doc: _deploy(doc)[0].__setitem__(0, "passed"), ()),
    "the outcome removed": (_removed, ()),
    "a later outcome invented": (_invented, ()),
    "the tallies dropped, its run deleted": (
        None,
        ("DELETE FROM tallies", "DELETE FROM runs WHERE verdict='UNKNOWN'"),
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGET_UNKNOWN))
def test_attack_reconcile_lookup_cache_forgets_the_unknown_outcome(
    pending: World, forgery: str
) -> None:
    """deploy's outcome is unknown; ci edits the lookup cache (`.git/gitaudit/index.sqlite`)
    until it shows no unknown outcome, then runs the plan: the run would deploy a second time
    (it executed deploy again before the fix, when the cache's rows were read). The outcome is a
    tally of the signed ledger kept under the local key's MAC (rewritten, it is counted again
    from the chain): deploy is not run, and the outcome can still be reconciled by readback."""
    unknown = pending.ref(RUNS)
    rewrite, statements = FORGET_UNKNOWN[forgery]
    edit_lookup_cache(pending, rewrite, *statements)
    recorded = pending.run()
    entry = recorded.doc["steps"]["deploy"]
    assert entry["status"] == "unknown" and entry["attempt"] is None, entry
    assert entry["reason"].startswith(f"its last outcome ({str(unknown)[:12]}) is unknown"), entry
    assert_plan(pending.gate(), "step.unknown", "UNKNOWN")
    (pending.path / "deployed.txt").write_text("v1\n")
    result = pending.cli("reconcile", "deploy", "--readback", "--key", str(pending.keys["ci"]))
    assert result.code == 0, result.out + result.err
    assert pending.gate().verdict == "PASS"


# ------------------------------------------------------ the runs ledger rewound before a run


def _deploy_not_run(doc: dict[str, Any]) -> None:
    """Another chain's run: deploy was not run there."""
    doc["verdict"], doc["reasons"] = "UNKNOWN", ["deploy was not run"]
    doc["steps"]["deploy"].update(status="not_run", reason="not targeted", attempt=None, checks=[])


@pytest.mark.parametrize("how", ["deleted", "moved to another chain"])
def test_attack_reconcile_ledger_rewound_before_the_run(pending: World, how: str) -> None:
    """deploy's outcome is unknown; ci deletes refs/audit/runs/default, or points it at another
    chain (a ci-signed run in which deploy did not run), the high-water marks left as they are,
    then runs the plan: the run saw no unknown outcome and deployed a second time (before the
    fix). The run refuses a ledger behind its mark before anything runs."""
    unknown = str(pending.ref(RUNS))
    if how == "deleted":
        pending.repo.git("update-ref", "-d", RUNS)
    else:
        pending.forge_run(unknown, edit=_deploy_not_run, signer=pending.ci, parent=None)
    moved = pending.ref(RUNS)
    result = pending.cli("run", "--key", str(pending.keys["ci"]))
    assert result.code == 1, result.out + result.err
    lines = result.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"error: {RUNS} "), lines
    assert lines[1].startswith("hint: ") and f"git update-ref {RUNS} {unknown}" in lines[1]
    assert pending.ref(RUNS) == moved  # deploy did not run: nothing was recorded
    assert_plan(pending.gate(), "evidence.ledger", "FAIL")


# ---------------------------------------------------- the unknown outcome moved to another tree

# variant -> the `git audit run` arguments of the run on the other tree
ANOTHER_TREE_RUNS: dict[str, tuple[str, ...]] = {
    "a full run": (),
    "a targeted run of deploy": ("deploy",),
    "a fresh, forced run": ("--fresh", "--force"),
}


@pytest.mark.parametrize("variant", sorted(ANOTHER_TREE_RUNS))
def test_attack_reconcile_unknown_outcome_moved_to_another_tree(
    pending: World, variant: str
) -> None:
    """deploy's outcome is unknown for tree A; reconcile is refused on any other tree. ci
    commits another tree B and runs the plan there: deploy is not executed, only reported still
    unknown, but that report counted as deploy's newest unknown outcome, now B's, and `reconcile
    --readback` on B was accepted (PASS for B, where deploy never ran, before the fix). The
    outcome stays A's: refused on B, with the tree to check out; reconciled on A it counts."""
    tree_a = pending.gate().plans[0].run
    record_a = json.loads(pending.files_at(str(tree_a))["run.json"])
    pending.repo.write("src.txt", "tree B\n")
    pending.repo.commit("tree B")
    key = ("--key", str(pending.keys["ci"]))
    ran = pending.cli("run", *ANOTHER_TREE_RUNS[variant], *key)
    assert ran.code == 3, ran.out + ran.err
    (pending.path / "deployed.txt").write_text("v1\n")
    tip = pending.ref(RUNS)
    result = pending.cli("reconcile", "deploy", "--readback", *key)
    assert result.code == 1, result.out + result.err
    lines = result.err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        f"error: the unknown outcome of step deploy was recorded for tree {record_a['tree'][:12]}"
    ), lines
    assert lines[1] == "hint: check out that tree to reconcile the outcome observed there"
    assert pending.ref(RUNS) == tip
    assert_plan(pending.gate(), "step.unknown", "UNKNOWN")
    pending.repo.git("reset", "-q", "--hard", "HEAD~1")
    settled = pending.cli("reconcile", "deploy", "--readback", *key)
    assert settled.code == 0, settled.out + settled.err
    assert pending.gate().verdict == "PASS"


# --------------------------------------------- a planner's reseal makes the step idempotent


def _counted_deploy(log: Path, pause: Path, **fields: Any) -> dict[str, Any]:
    """deploy (covering R1) as in `deploy_plan`: each execution appends a line to *log* (its
    effect, outside the tree), then waits as long as *pause* says (30 s: it times out)."""
    script = f"echo deployed >> {log}; sleep $(cat {pause})"
    return step(
        "deploy",
        check("sh", "-c", script, timeout=1),
        covers=["R1"],
        **{"idempotent": False, "readback": [READBACK], "workspace": "live", **fields},
    )


@pytest.mark.parametrize("who", ["planner", "sealer"])
def test_attack_reconcile_planner_makes_the_step_idempotent(
    asked: Asked, tmp_path: Path, who: str
) -> None:
    """The agent's planner key sealed a plan with `deploy` (not idempotent); deploy timed out,
    so its outcome is unknown and it may not run again before it is reconciled. The planner
    reseals deploy as idempotent: the plans ref records a strengthening (it closes the way to
    settle deploy by someone's word), which a planner may seal, and `git audit run` deployed a
    second time, and the gate said PASS (before the fix). Whether a step that may have had its
    effect can run again is a sealer's word: the outcome must still be reconciled, as failed
    attempts still count across a planner's reseals: `git audit run` reports it unknown and
    `next` says to reconcile it. A sealer's reseal (the control variant) lets it run again."""
    world = asked.world
    log, pause = tmp_path / "deploys", tmp_path / "pause"
    pause.write_text("30\n")
    world.repo.write(".gitignore", "deployed.txt\n")
    steps = [*PLAN["steps"], _counted_deploy(log, pause)]
    assert asked.seal(answering(*steps)).commit is not None
    world.repo.commit("deploy, the planner's own step")
    assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
    assert log.read_text() == "deployed\n"
    idempotent = answering(*steps[:2], _counted_deploy(log, pause, idempotent=True))
    if who == "planner":
        resealed = asked.seal(idempotent)
    else:
        world.write_plan(idempotent)
        (checked,) = check_worktree(world.path, "default")
        resealed = seal_plan(world.handle(), world.alice, checked)
    assert resealed.record is not None and not resealed.record.weakened
    assert resealed.record.strengthenings == ("step deploy: idempotent False -> True",)
    world.repo.commit("deploy is idempotent now")
    pause.write_text("0\n")  # a second deployment would pass now
    again = world.run()
    if who == "sealer":  # the sealer's word: deploy may simply run again
        assert again.doc["steps"]["deploy"]["status"] == "passed"
        assert log.read_text() == "deployed\ndeployed\n"
        assert world.gate().verdict == "PASS"
        return
    entry = again.doc["steps"]["deploy"]
    assert entry["status"] == "unknown" and entry["attempt"] is None, entry
    assert log.read_text() == "deployed\n"  # not deployed a second time
    judged = assert_plan(world.gate(with_states=True), "step.unknown", "UNKNOWN")
    assert judged.states["deploy"] == "unknown"


# ------------------------------------------------- deploy executed again in another clone


@pytest.mark.parametrize("how", ["fetched", "pushed"])
def test_attack_reconcile_skipped_by_running_in_another_clone(
    world: World, tmp_path: Path, how: str
) -> None:
    """deploy timed out: its outcome is unknown, and `git audit run` refuses to run it again
    before a reconcile. ci clones the repository without its audit runs, commits its change and
    runs the plan there: that ledger holds no unknown outcome, so deploy is executed a second
    time, passes, and the run says PASS. Then ci brings the pass back, fetched as a
    remote-tracking copy of that clone's ledger, or pushed from the clone (`git audit push`
    signed its run again on top of the server's ledger, unknown outcome and all): the gate said
    PASS for a deploy run twice without the reconcile the contract demands (both before the
    fix). A pass of a step to reconcile first counts only when no unknown outcome of it stands
    before it on its chain, nor on a copy of the ledger the gate reads that does not hold it."""
    go = tmp_path / "go"  # deploy hangs (and times out) until it exists
    hang = f"test -e {go} || sleep 30"
    world.seal(
        plan(step("deploy", check("sh", "-c", hang, timeout=0.5), idempotent=False), step("lint"))
    )
    assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
    server = world.serve(tmp_path / "server.git") if how == "pushed" else None
    if server is not None:  # the unknown outcome is on the server's ledger too
        world.repo.git("push", "-q", "--no-verify", "origin", f"{RUNS}:{RUNS}")
    go.touch()
    world.repo.write("fix.txt", "the change\n")
    world.repo.commit("the change")
    clone = another_clone(world, tmp_path, server)
    ran = audit(clone, "run", "--key", str(world.keys["ci"]))
    assert ran.code == 0, ran.out + ran.err  # deploy executed again there
    if how == "fetched":
        world.repo.git(
            "fetch", "-q", str(clone), f"{RUNS}:refs/gitaudit/remotes/b/audit/runs/default"
        )
        judged = assert_plan(world.gate(), "evidence.unreconciled", "FAIL")
        assert judged.reasons[0].step == "deploy"
    else:
        pushed = audit(clone, "push")  # pre-receive judges the replayed run
        assert pushed.code != 0 and "never reconciled" in pushed.err, pushed.out + pushed.err
        assert world.cli("sync").code == 0
        assert_plan(world.gate(), "evidence.missing", "UNKNOWN")


# ------------------------------------- a pass written by hand over the unknown outcome


def _executed_pass(doc: dict[str, Any]) -> None:
    """What a run that executed deploy again, and saw it pass, would write (no reconcile)."""
    doc["verdict"], doc["reasons"] = "PASS", []
    entry = doc["steps"]["deploy"]
    entry.update(status="passed", reason="", attempt=2)
    for result in entry["checks"]:
        result.update(outcome="passed", message="exit code 0", exit_code=0, timed_out=False)


@pytest.mark.parametrize("judged", ["the forged run", "an honest run of lint carrying it"])
def test_attack_reconcile_pass_written_over_the_unknown_outcome(
    pending: World, judged: str
) -> None:
    """deploy's outcome is unknown. ci's key signs, by hand, the run `git audit run` would
    write had it executed deploy again and seen it pass (no reconciliation claimed, so the
    reconciler rule has nothing to judge), on top of the unknown outcome; or has an honest run
    of lint carry deploy from it. The pass counts only when no unsettled outcome of deploy
    stands below it on its chain: `evidence.unreconciled`, naming the unknown run."""
    unknown = str(pending.ref(RUNS))
    forged = pending.forge_run(unknown, edit=_executed_pass, signer=pending.ci)
    if judged != "the forged run":
        honest = pending.run(targets=["lint"])
        assert honest.doc["steps"]["deploy"]["carried_from"] == str(forged)
    verdict = assert_plan(pending.gate(), "evidence.unreconciled", "FAIL")
    assert verdict.reasons[0].step == "deploy"
    assert f"its outcome in run {unknown[:12]} before it" in verdict.reasons[0].message


def _plain(status: str) -> Any:
    """deploy's entry as a run that executed it would write it with *status*, no reconcile."""

    def edit(doc: dict[str, Any]) -> None:
        doc["steps"]["deploy"].update(status=status, reason="written by hand", checks=[])

    return edit


def _observed_fail(doc: dict[str, Any]) -> None:
    """What `reconcile --observed fail` writes, which ci's key may not sign for the gate."""
    entry = doc["steps"]["deploy"]
    entry.update(status="failed", reason="reconciled: observed fail", attempt=None, checks=[])
    entry["reconciled"] = {"mode": "observed", "note": "it failed, trust me"}


# variant -> the entry ci's key writes by hand over deploy's unknown outcome
HAND_WRITTEN_SETTLEMENTS: dict[str, Any] = {
    "a plain failure": _plain("failed"),
    "an unsound pass": _plain("unsound"),
    "an observed failure": _observed_fail,
}


@pytest.mark.parametrize("entry", sorted(HAND_WRITTEN_SETTLEMENTS))
def test_attack_reconcile_settled_by_a_hand_written_outcome(
    world: World, tmp_path: Path, entry: str
) -> None:
    """KNOWN LIMIT (threat model, trust and roles: out of scope). deploy timed out: its outcome
    is unknown and `git audit run` refuses to run it again before a reconcile. ci's key signs,
    by hand, a run on top of it whose deploy entry is a plain failure, a pass of an unsound run,
    or an observation of failure (the reconciler rule judges only the run it is judged in): the
    newest execution of deploy is no longer unknown, so the next `git audit run` (on a new tree)
    deploys a second time, it passes, and the gate says PASS: neither counts an entry that no
    honest run writes over an unknown outcome as what it is. Closing it needs the ledger's
    tallies and the gate to let only a reconciliation settle an unknown outcome recorded under
    a contract of the current lineage (`ledger/plansref.attempt_contracts`)."""
    go, log = tmp_path / "go", tmp_path / "deploys"
    hang = f"echo deployed >> {log}; test -e {go} || sleep 30"
    world.seal(
        plan(step("deploy", check("sh", "-c", hang, timeout=0.5), idempotent=False), step("lint"))
    )
    assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
    world.forge_run(str(world.ref(RUNS)), edit=HAND_WRITTEN_SETTLEMENTS[entry], signer=world.ci)
    go.touch()
    world.repo.write("fix.txt", "the change\n")
    world.repo.commit("the change")
    again = world.run()
    assert again.doc["steps"]["deploy"]["status"] == "passed"
    assert log.read_text() == "deployed\ndeployed\n"  # deployed a second time, unreconciled
    assert world.gate().verdict == "PASS"


# ------------------------------ an execution the contract closed, settled by its readback checks


def _deploying(tmp_path: Path, *others: str) -> dict[str, Any]:
    """deploy (beside steps *others*) may fail once (`max_attempts: 1`) and is not idempotent;
    its readback finds deployed.txt in the live work tree. While tmp_path/fail exists it fails;
    else it deploys (deployed.txt, a line in tmp_path/deploys) and then, while tmp_path/hang
    exists, hangs until its timeout: what the agent's code under test decides."""
    fail, hang, log = tmp_path / "fail", tmp_path / "hang", tmp_path / "deploys"
    script = (
        f"test -e {fail} && exit 1; touch deployed.txt; echo deployed >> {log}; "
        f"test -e {hang} && sleep 30; exit 0"
    )
    deploy = step(
        "deploy",
        check("sh", "-c", script, timeout=0.5),
        idempotent=False,
        readback=[READBACK],
        workspace="live",
        max_attempts=1,
    )
    return plan(deploy, *(step(other) for other in others))


def _exhaust(world: World, tmp_path: Path, *others: str) -> None:
    """deploy fails once and is exhausted: `git audit run` no longer executes it."""
    world.repo.write(".gitignore", "deployed.txt\n")
    world.seal(_deploying(tmp_path, *others))
    (tmp_path / "fail").touch()
    assert world.run().doc["steps"]["deploy"]["status"] == "failed"
    assert world.run().doc["steps"]["deploy"]["status"] == "exhausted"
    (tmp_path / "fail").unlink()


@pytest.mark.parametrize(
    "how", ["settled by ci's readback", "observed by a reconciler", "carried by a run of lint"]
)
def test_attack_reconcile_settles_a_forced_execution_past_exhaustion(
    world: World, tmp_path: Path, how: str
) -> None:
    """deploy is exhausted (its one failed attempt spent). ci runs it with `--force` and makes
    it hang once it has deployed: the forced execution's outcome is unknown, not a pass, so
    `evidence.forced-past-exhaustion` had nothing to judge; `git audit reconcile deploy
    --readback` (or a reconciler's `--observed pass`) then settled it as passed in an unforced
    run, and the gate said PASS for a step the contract closed, with no sealer's reset (before
    the fix; also when an honest `git audit run lint` carried it). A settled pass is judged as
    the execution it settles: `evidence.past-exhaustion` (FAIL), until a sealer resets the
    attempts."""
    _exhaust(world, tmp_path, "lint")
    (tmp_path / "hang").touch()
    forced = world.run(force=True)
    assert forced.doc["steps"]["deploy"]["status"] == "unknown"
    key = world.keys["ci"]
    if how == "observed by a reconciler":
        key = generate_key("rita").private_path
        public = load_signer(key).public_key
        trust_add(world.handle(), world.alice, public, "runner", "rita")
        trust_add(world.handle(), world.alice, public, "reconciler", "rita")
        settled = world.cli("reconcile", "deploy", "--observed", "pass", "--key", str(key))
    else:
        settled = world.cli("reconcile", "deploy", "--readback", "--key", str(key))
    assert settled.code == 0, settled.out + settled.err  # the plan is PASS, says the run
    if how == "carried by a run of lint":
        honest = world.run(targets=["lint"])
        assert honest.doc["steps"]["deploy"]["status"] == "carried"
    judged = assert_plan(world.gate(), "evidence.past-exhaustion", "FAIL")
    assert judged.reasons[0].step == "deploy"
    assert judged.reasons[0].message.startswith("step deploy was settled as passed in run ")
    assert "the execution it settles was made past them" in judged.reasons[0].message
    reset_attempts(world.handle(), world.alice, "default", "deploy", "reviewed the deploy")
    assert world.gate().verdict == "PASS"  # a sealer's word lets it count


@pytest.mark.parametrize("how", ["fetched", "pushed"])
@pytest.mark.parametrize("standing", ["unknown", "exhausted"])
def test_attack_reconcile_settles_an_execution_made_in_another_clone(
    world: World, tmp_path: Path, standing: str, how: str
) -> None:
    """deploy's outcome is unknown (or deploy is exhausted) on the plan's ledger. ci commits its
    change and runs the plan in another clone without the audit runs: deploy is executed there
    (a second deploy), and ci makes it hang once it has deployed, so its outcome is unknown, not
    a pass that `evidence.unreconciled` (or `evidence.past-exhaustion`) judges; `git audit
    reconcile deploy --readback` in the clone settles it as passed. Brought back as a
    remote-tracking copy, the gate said PASS for the new tree, and `git audit push` from the
    clone was accepted by pre-receive (all four before the fix). The settled pass is judged as
    the execution it settles: FAIL, and the push is refused. (The plan holds deploy alone: a
    step the reconcile run carried would name a run of the clone that the push signed again,
    which pre-receive refuses by itself.)"""
    world.repo.write(".gitignore", "deployed.txt\n")
    if standing == "exhausted":
        _exhaust(world, tmp_path)
        code = "evidence.past-exhaustion"
    else:
        world.seal(_deploying(tmp_path))
        (tmp_path / "hang").touch()
        assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
        (tmp_path / "hang").unlink()
        code = "evidence.unreconciled"
    server = world.serve(tmp_path / "server.git") if how == "pushed" else None
    if server is not None:  # what stands is on the server's ledger too
        world.repo.git("push", "-q", "--no-verify", "origin", f"{RUNS}:{RUNS}")
    world.repo.write("fix.txt", "the change\n")
    world.repo.commit("the change")
    clone = another_clone(world, tmp_path, server)
    (tmp_path / "hang").touch()
    ran = audit(clone, "run", "--key", str(world.keys["ci"]))
    assert ran.code == 3, ran.out + ran.err  # deploy executed there, its outcome unknown
    settled = audit(clone, "reconcile", "deploy", "--readback", "--key", str(world.keys["ci"]))
    assert settled.code == 0, settled.out + settled.err
    if how == "fetched":
        world.repo.git("fetch", "-q", str(clone), f"{RUNS}:{mirror_ref('b', RUNS)}")
        judged = assert_plan(world.gate(), code, "FAIL")
        assert judged.reasons[0].step == "deploy"
        assert judged.reasons[0].message.startswith("step deploy was settled as passed in run ")
    else:
        pushed = audit(clone, "push")  # pre-receive judges the replayed runs
        assert pushed.code != 0, pushed.out + pushed.err
        assert "FAIL    default: step deploy was settled as passed in run " in pushed.err
        assert world.cli("sync").code == 0
        assert world.gate().verdict != "PASS"


# ------------------------------------ a readback run under the agent's PATH settles nothing


@pytest.mark.parametrize("says", ["fail", "pass"])
def test_attack_reconcile_readback_under_the_agents_path(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, says: str
) -> None:
    """deploy deployed, then timed out: its outcome is unknown. The agent runs `git audit
    reconcile deploy --readback` with a folder of its own first on PATH, holding a `grep` (the
    readback's program) that exits 1 (or 0): ci's key signs the settlement. The user's gate does
    not take that readback (`evidence.program-elsewhere`), but the user's own `git audit run`
    took it as settling the outcome and deployed a second time; once that passed the gate said
    PASS for a deploy run twice without a reconcile it accepts (both before the fix). A
    reconciliation made here whose programs this PATH does not offer leaves the outcome open:
    deploy is not executed, and reconciling it again with the user's PATH settles it."""
    log = tmp_path / "deploys"
    _read_back_under_the_agents_path(world, tmp_path, monkeypatch, says, log)
    assert world.gate().verdict != "PASS"  # the agent's readback is not the user's evidence
    again = world.run()  # the user's own run, with the user's PATH
    assert again.doc["steps"]["deploy"]["status"] == "unknown"
    assert "reconcile before retrying" in again.doc["steps"]["deploy"]["reason"]
    assert log.read_text() == "deployed\n"  # deployed once
    assert_plan(world.gate(), "step.unknown", "UNKNOWN")
    settled = world.cli("reconcile", "deploy", "--readback", "--key", str(world.keys["ci"]))
    assert settled.code == 0, settled.out + settled.err  # the user's readback settles it
    assert world.gate().verdict == "PASS"


@pytest.mark.parametrize("says", ["fail", "pass"])
def test_attack_reconcile_mission_takes_a_readback_under_the_agents_path_as_settling(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, says: str
) -> None:
    """As above: the agent's readback under its own PATH (its `grep` exiting 1, or 0) left
    deploy's outcome open for `git audit run`, which refuses to execute deploy before a
    reconcile. `next` read the outcome as settled (deploy `retry` after an observed failure,
    `ready` after a pass the gate refuses) and `route` planned through it, advice `run`
    contradicts (both before the fix). Mission control now takes the outcome as the run does:
    `reconcile deploy`."""
    _read_back_under_the_agents_path(world, tmp_path, monkeypatch, says)
    nxt = world.cli("next", "--json").json()["plans"][0]
    assert nxt["needs_reconcile"] == ["deploy"], nxt
    assert "deploy" not in nxt["ready"] + nxt["retryable"], nxt
    assert "reconcile deploy" in world.cli("next").out
    ran = world.run()  # what `run` does with deploy: it waits for a reconcile
    assert "reconcile before retrying" in ran.doc["steps"]["deploy"]["reason"]


# ------------------------------------------------- a readback check dropped by the planner

HEALTHY = {"type": "file_exists", "path": "healthy.txt"}
HEALTHY_REGEX = {"type": "regex", "path": "deployed.txt", "pattern": "^v2$"}


@pytest.mark.parametrize(
    ("kept", "dropped"),
    [
        ([READBACK], [HEALTHY]),  # the second of two dropped
        ([HEALTHY], [READBACK]),  # the first of two dropped
        ([READBACK], [HEALTHY_REGEX, HEALTHY]),  # two of three dropped
    ],
    ids=["second-of-two", "first-of-two", "two-of-three"],
)
def test_attack_reconcile_planner_drops_a_readback_check(
    asked: Asked, kept: list[dict[str, Any]], dropped: list[dict[str, Any]]
) -> None:
    """alice (a sealer) seals `deploy`, not idempotent, whose unknown outcome settles by
    readback only when the deployment is there *and* healthy (every readback check must pass).
    deploy timed out: the deployment is there (deployed.txt) but not healthy, so `reconcile
    --readback` fails it. The agent's planner key reseals deploy with one readback check fewer:
    `compare` ranked "readback check removed" a strengthening (it closes the way to settle the
    step only when no readback check is left), the planner's seal was accepted, `reconcile
    --readback` ran the checks left, and the gate said PASS (all three before the fix). Dropping
    some readback checks while others remain loosens the way to settle the step: a weakening,
    refused for the planner (through `plan seal` and in a hand-made commit)."""
    world = asked.world
    world.repo.write(".gitignore", "deployed.txt\nhealthy.txt\n")
    deploy = step(
        "deploy",
        check("sleep", "30", timeout=0.5),
        covers=["R1"],
        idempotent=False,
        readback=[*kept, *dropped],
        workspace="live",
    )
    world.write_plan(answering(*PLAN["steps"], deploy))
    (checked,) = check_worktree(world.path, "default")
    assert seal_plan(world.handle(), world.alice, checked).commit is not None
    world.repo.commit("deploy, sealed by alice")
    assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
    (world.path / "deployed.txt").write_text("v1\n")
    # the sealed readback settles the deployment as it is: there, but not healthy
    settled = world.cli("reconcile", "deploy", "--readback", "--key", str(world.keys["ci"]))
    assert "reconciled as failed" in settled.out, settled.out + settled.err
    assert world.gate().verdict == "FAIL"
    loose = answering(*PLAN["steps"], {**deploy, "readback": kept})
    tip = asked.plans_tip()
    with pytest.raises(SealError) as caught:
        asked.seal(loose)
    message = caught.value.message
    assert "planner 'agent' cannot weaken plan 'default'" in message, message
    assert "readback check removed or changed" in message, message
    assert asked.plans_tip() == tip
    asked.forge_seal(loose)  # signed by hand with the planner key, the weakening recorded
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "readback check removed or changed" in result.reasons[0].message


def test_attack_reconcile_control_the_planner_drops_every_readback_check(asked: Asked) -> None:
    """Control: dropping every readback check closes the way to settle the step by readback, a
    strengthening the agent's planner key may seal."""
    world = asked.world
    deploy = step(
        "deploy",
        check("true"),
        covers=["R1"],
        idempotent=False,
        readback=[READBACK, HEALTHY],
    )
    world.write_plan(answering(*PLAN["steps"], deploy))
    (checked,) = check_worktree(world.path, "default")
    assert seal_plan(world.handle(), world.alice, checked).commit is not None
    resealed = asked.seal(answering(*PLAN["steps"], {**deploy, "readback": []}))
    assert resealed.record is not None and not resealed.record.weakened


# ------------------------------------------------- readback checks reordered by the planner

WRITES_STATUS = {"type": "run", "argv": ["sh", "-c", "mkdir -p build && echo ok > build/status"]}
READS_STATUS = {"type": "regex", "path": "build/status", "pattern": "ok"}
STATUS_EXISTS = {"type": "file_exists", "path": "build/status"}


@pytest.mark.parametrize(
    ("sealed", "reordered"),
    [
        ([READS_STATUS, WRITES_STATUS], [WRITES_STATUS, READS_STATUS]),
        (
            [STATUS_EXISTS, READS_STATUS, WRITES_STATUS],
            [STATUS_EXISTS, WRITES_STATUS, READS_STATUS],
        ),
        (
            [STATUS_EXISTS, WRITES_STATUS, READS_STATUS],
            [WRITES_STATUS, READS_STATUS, STATUS_EXISTS],
        ),
    ],
    ids=["swapped", "program-moved-up", "rotated"],
)
def test_attack_reconcile_planner_reorders_readback_checks(
    asked: Asked, sealed: list[dict[str, Any]], reordered: list[dict[str, Any]]
) -> None:
    """alice (a sealer) seals `deploy`, not idempotent, whose readback first reads the status
    the deployment left in the checkout (`build/status`, ignored) and then refreshes it. deploy
    timed out; in the fresh checkout of a reconciliation nothing left a status, so the sealed
    readback fails. The agent's planner key reseals deploy with the same readback checks in
    another order, the program that writes the status first: `compare` saw the same multiset
    of readback checks ("no change"), the planner's seal was accepted, `reconcile --readback`
    read what the program had just written, and the gate said PASS (all three before the
    fix). Sealed readback checks run in another order, while some are left, weaken the way to
    settle the step: the planner's seal is refused, and its hand-made commit by the chain."""
    world = asked.world
    world.repo.write(".gitignore", "build/\n")
    deploy = step(
        "deploy",
        check("sleep", "30", timeout=0.5),
        covers=["R1"],
        idempotent=False,
        readback=sealed,
    )
    world.write_plan(answering(*PLAN["steps"], deploy))
    (checked,) = check_worktree(world.path, "default")
    assert seal_plan(world.handle(), world.alice, checked).commit is not None
    world.repo.commit("deploy, sealed by alice")
    assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
    settled = world.cli("reconcile", "deploy", "--readback", "--key", str(world.keys["ci"]))
    assert "reconciled as failed" in settled.out, settled.out + settled.err
    loose = answering(*PLAN["steps"], {**deploy, "readback": reordered})
    tip = asked.plans_tip()
    with pytest.raises(SealError) as caught:
        asked.seal(loose)
    message = caught.value.message
    assert "planner 'agent' cannot weaken plan 'default'" in message, message
    assert "sealed readback checks reordered" in message, message
    assert asked.plans_tip() == tip
    asked.forge_seal(loose)  # signed by hand with the planner key, the weakening recorded
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "sealed readback checks reordered" in result.reasons[0].message


# ------------------------------------------------- a check added that makes a failure unknown

HANGS = check("sleep", "30", timeout=0.5)
SEARCHES = {"type": "pytest", "argv": ["-q", "no_such_test.py"], "timeout": 0.01}


@pytest.mark.parametrize(
    ("where", "added", "idempotent"),
    [
        ("verify", HANGS, False),  # last in verify, after every sealed check
        ("output", HANGS, False),  # in an output listed last
        ("verify", SEARCHES, False),  # a pytest check that times out
        ("verify", HANGS, True),  # with deploy made idempotent in the same reseal
    ],
    ids=["verify", "output", "pytest", "made-idempotent"],
)
def test_attack_reconcile_planner_adds_a_check_that_makes_a_failure_unknown(
    asked: Asked, where: str, added: dict[str, Any], idempotent: bool
) -> None:
    """alice (a sealer) seals `deploy`, not idempotent: it deploys (deployed.txt) and its smoke
    test (`false`) fails, so deploy FAILs, although its readback (deployed.txt exists) would say
    deployed. The agent's planner key reseals deploy with one check added after every sealed
    check (last in verify, or in an output listed last; with deploy also made idempotent): a
    check that times out. One unknown check outcome makes the step's outcome unknown, whatever
    the sealed checks found, and a step that is not idempotent is then settled by
    reconciliation: `compare` ranked the check added a strengthening, the planner's seal was
    accepted, deploy's run was UNKNOWN instead of FAILED, `reconcile --readback` settled it as
    passed, and the gate said PASS (all before the fix). A check that can end unknown, added
    to a step that is not idempotent on either side, is a weakening: refused for the planner,
    through `plan seal` and in a hand-made commit."""
    world = asked.world
    world.repo.write(".gitignore", "deployed.txt\n")
    deploy = step(
        "deploy",
        check("sh", "-c", "echo v1 > deployed.txt"),
        check("false"),
        covers=["R1"],
        idempotent=False,
        readback=[READBACK],
        workspace="live",
    )
    world.write_plan(answering(*PLAN["steps"], deploy))
    (checked,) = check_worktree(world.path, "default")
    assert seal_plan(world.handle(), world.alice, checked).commit is not None
    world.repo.commit("deploy, sealed by alice")
    assert world.run().doc["steps"]["deploy"]["status"] == "failed"  # the sealed contract
    grown: dict[str, Any] = {**deploy, "idempotent": idempotent}
    if where == "verify":
        grown["verify"] = [*deploy["verify"], added]
    else:
        grown["outputs"] = [{"name": "smoke", "verify": [added]}]
    loose = answering(*PLAN["steps"], grown)
    tip = asked.plans_tip()
    with pytest.raises(SealError) as caught:
        asked.seal(loose)
    message = caught.value.message
    assert "planner 'agent' cannot weaken plan 'default'" in message, message
    assert "check added to a step that is not idempotent" in message, message
    assert asked.plans_tip() == tip
    asked.forge_seal(loose)  # signed by hand with the planner key, the weakening recorded
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "check added to a step that is not idempotent" in result.reasons[0].message


def test_attack_reconcile_control_the_planner_adds_a_file_check_to_deploy(asked: Asked) -> None:
    """Control: a `file_exists` check (it never ends unknown) added to deploy, or any check
    added to an idempotent step, is a strengthening the planner may seal."""
    world = asked.world
    deploy = step("deploy", check("true"), covers=["R1"], idempotent=False, readback=[READBACK])
    world.write_plan(answering(*PLAN["steps"], deploy))
    (checked,) = check_worktree(world.path, "default")
    assert seal_plan(world.handle(), world.alice, checked).commit is not None
    grown = {**deploy, "verify": [*deploy["verify"], {"type": "file_exists", "path": "x"}]}
    unit = {**PLAN["steps"][0], "verify": [*PLAN["steps"][0]["verify"], HANGS]}
    resealed = asked.seal(answering(unit, PLAN["steps"][1], grown))
    assert resealed.record is not None and not resealed.record.weakened


@pytest.mark.parametrize("later", ["unknown", "passed"])
def test_attack_reconcile_carried_past_a_newer_execution_by_reverted_inputs(
    world: World, later: str
) -> None:
    """migrate is not idempotent (its effect lives outside the tree) and declares `src/**`. It
    passed with v1; then it ran with v2 and timed out (its outcome unknown), or passed. The
    agent puts v1 back and runs: migrate's inputs match the first pass, which the run carried
    (PASS, the unknown outcome never reconciled; or a claim that v1 is in effect where v2 is),
    before the fix. A step that is not idempotent is carried by its inputs only from its
    newest execution: here it is not carried, so the unknown outcome must be reconciled first,
    and after a settled v2 pass it runs again with v1."""
    hang = 'if grep -q v2 src/app.txt; then sleep 30; fi; echo "$(cat src/app.txt)"'
    slow = "v2" if later == "unknown" else "never"
    world.repo.write("src/app.txt", "v1\n")
    world.repo.commit("v1")
    migrate = check("sh", "-c", hang.replace("v2", slow), timeout=0.5)
    world.seal(plan(step("migrate", migrate, idempotent=False, inputs=["src/**"]), step("lint")))
    assert world.run().verdict == "PASS"
    world.repo.write("src/app.txt", "v2\n")
    world.repo.commit("v2")
    second = world.run()
    assert second.doc["steps"]["migrate"]["status"] == later, second.doc["steps"]["migrate"]
    world.repo.write("src/app.txt", "v1\n")
    world.repo.commit("v1 again")
    third = world.run()
    entry = third.doc["steps"]["migrate"]
    assert entry.get("carried_from") is None, entry
    if later == "unknown":
        assert entry["status"] == "unknown" and entry.get("attempt") is None, entry
        assert_plan(world.gate(), "step.unknown", "UNKNOWN")
    else:
        assert entry["status"] == "passed" and entry.get("attempt") is not None, entry
        assert world.gate().verdict == "PASS"


def test_attack_reconcile_control_an_idempotent_step_is_carried_by_reverted_inputs(
    world: World,
) -> None:
    """Control: the same with migrate idempotent carries the first pass (nothing outside the
    tree changed with v2)."""
    world.repo.write("src/app.txt", "v1\n")
    world.repo.commit("v1")
    world.seal(plan(step("migrate", check("cat", "src/app.txt"), inputs=["src/**"]), step("lint")))
    first = world.run()
    assert first.verdict == "PASS"
    world.repo.write("src/app.txt", "v2\n")
    world.repo.commit("v2")
    assert world.run().verdict == "PASS"
    world.repo.write("src/app.txt", "v1\n")
    world.repo.commit("v1 again")
    entry = world.run().doc["steps"]["migrate"]
    assert entry["status"] == "carried" and entry.get("carried_from") == first.commit, entry


IN_FLIGHT = b"sleep\x0031\x00"  # deploy's check while it runs: no other process has this argv


def _deploys_in_flight() -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                count += (entry / "cmdline").read_bytes() == IN_FLIGHT
            except OSError:
                continue
    return count


@pytest.mark.parametrize(
    ("second", "other_tree"),
    [(["run"], False), (["run", "deploy"], False), (["run"], True)],
    ids=["same-tree", "targeted", "another-tree"],
)
def test_attack_reconcile_second_run_while_deploy_is_in_flight(
    world: World, second: list[str], other_tree: bool
) -> None:
    """deploy is not idempotent: a run that leaves its outcome unknown must be reconciled before
    deploy may execute again. But a run records that outcome only when it ends: while ci's run
    is still executing deploy, a second `git audit run` (the same tree, `run deploy`, or after
    the agent changed the work tree) read a ledger with no unknown outcome and executed deploy
    a second time, at once; the first then timed out (unknown, never reconciled before the
    second execution) and the second's record stood beside it (before the fix, all three).
    Runs and reconciles of a plan with steps that are not idempotent now hold an exclusive
    lock from before they read the ledger until they record: the second is refused in one
    line naming the plan, the steps and the lock file, executes nothing and records nothing."""
    world.seal(plan(step("deploy", check("sleep", "31", timeout=3), idempotent=False)))
    first = _run_until_its_check_sleeps(world, "deploy")
    if other_tree:
        world.repo.write("app.py", "changed = True\n")
    again = audit(world.path, *second, process=True)
    assert first.wait(timeout=60) == 3, first.communicate()  # UNKNOWN: deploy timed out
    assert again.code == 1, again.out + again.err
    assert "under way" in again.err and "deploy" in again.err and ".flock" in again.err
    runs = git(world.path, "log", "--format=%s", RUNS).splitlines()
    assert len(runs) == 1 and "UNKNOWN" in runs[0], runs  # the first run's record only
    # the outcome stays open: a run now refuses to execute deploy, and nothing passes
    after = audit(world.path, "run", process=True)
    assert after.code == 3 and "reconcile before retrying" in after.err, after.out + after.err
    assert _deploys_in_flight() == 0
    assert world.gate().verdict != "PASS"


@pytest.mark.parametrize(
    "breaks", ["deleted", "renamed", "folder-renamed", "deleted-and-another-home"]
)
def test_attack_reconcile_lock_removed_while_deploy_is_in_flight(world: World, breaks: str) -> None:
    """deploy (not idempotent) hangs on tree A (which holds `slow`) and passes on tree B. While
    ci's run of A is still executing deploy (holding the lock that keeps runs apart), the agent
    deletes `.git/gitaudit/not-idempotent-default.flock` (or renames it, or renames
    `.git/gitaudit`; or deletes it and starts the second run with `GITAUDIT_HOME` at a folder of
    its own), commits B and runs the plan: the second run opened a new lock file, nobody held
    it, so deploy executed a second time at once, passed and was recorded; the first then timed
    out (unknown) on top, and the gate said PASS for B (all four before the fix). The lock is
    now also held in the user's gitaudit home, which the agent cannot write, and (on Linux) as
    an abstract socket name, which no file or environment variable moves: the second run is
    refused and executes nothing."""
    hang = check("sh", "-c", "test -e slow && exec sleep 31; true", timeout=3)
    world.seal(plan(step("deploy", hang, idempotent=False)))
    world.repo.write("slow", "1\n")
    world.repo.commit("tree A: deploy hangs")
    first = _run_until_its_check_sleeps(world, "deploy")
    state = world.path / ".git" / "gitaudit"
    lock = state / "not-idempotent-default.flock"
    assert lock.exists()
    env = None
    if breaks == "renamed":
        lock.rename(world.path / ".git" / "elsewhere.flock")
    elif breaks == "folder-renamed":
        state.rename(world.path / ".git" / "gitaudit.old")
    else:
        lock.unlink()
    if breaks == "deleted-and-another-home":
        if not sys.platform.startswith("linux"):
            pytest.skip("the abstract socket name is Linux's")
        env = {"GITAUDIT_HOME": str(world.path.parent / "agent-home")}
    world.repo.git("rm", "-q", "slow")
    world.repo.commit("tree B: deploy passes")
    again = audit(world.path, "run", process=True, env=env)
    assert first.wait(timeout=60) == 3, first.communicate()  # UNKNOWN: deploy timed out
    assert again.code == 1 and "under way" in again.err, again.out + again.err
    runs = git(world.path, "log", "--format=%s", RUNS).splitlines()
    assert len(runs) == 1 and "UNKNOWN" in runs[0], runs  # the first run's record only
    assert world.gate().verdict != "PASS"


def test_attack_reconcile_control_idempotent_runs_still_run_at_once(world: World) -> None:
    """Control: a plan whose steps are all idempotent takes no such lock; two runs at once
    both execute and both are recorded."""
    world.seal(plan(step("lint", check("sleep", "31", timeout=2))))
    first = _run_until_its_check_sleeps(world, "lint")
    again = audit(world.path, "run", process=True)
    assert first.wait(timeout=60) == 3
    assert again.code == 3, again.out + again.err
    assert len(git(world.path, "log", "--format=%s", RUNS).splitlines()) == 2


@pytest.mark.parametrize("edited", [False, True], ids=["as-sealed", "made-idempotent-on-disk"])
def test_attack_reconcile_watch_trial_executes_deploy_again(world: World, edited: bool) -> None:
    """deploy (not idempotent, run in the live work tree, where it appends to deploys.log) timed
    out: its outcome is unknown and `git audit run` refuses to execute it before a reconcile.
    A trial round of `git audit watch` (no `--record`) executed it again all the same, also
    with the work tree's plan file left as sealed (both variants before the fix; the second
    with deploy made idempotent in the work tree's plan, which the seal does not). A trial
    now takes the open outcomes from the ledger by the run's own rule (the sealed contract's
    lineage): deploy is not executed, and the log holds the one deployment."""
    deploy = check("sh", "-c", "echo x >> deploys.log; test -e slow && sleep 30; true", timeout=1)
    world.repo.write(".gitignore", "deploys.log\nslow\n")
    world.seal(plan(step("deploy", deploy, idempotent=False, workspace="live")))
    world.repo.git("config", "audit.signingKey", str(world.keys["ci"]))
    (world.path / "slow").write_text("1\n")
    first = audit(world.path, "run", process=True)
    assert first.code == 3 and "outcome is unknown" in first.err, first.out + first.err
    (world.path / "slow").unlink()
    log = world.path / "deploys.log"
    assert log.read_text() == "x\n"
    if edited:
        world.write_plan(plan(step("deploy", deploy, idempotent=True, workspace="live")))
    audit(world.path, "watch", "--once", process=True)
    assert log.read_text() == "x\n", "the trial deployed again"
    assert world.gate().verdict != "PASS"


@pytest.mark.parametrize("edited", [False, True], ids=["as-sealed", "made-idempotent-on-disk"])
def test_attack_reconcile_watch_trial_deploys_and_its_timeout_is_forgotten(
    world: World, edited: bool
) -> None:
    """deploy (not idempotent, live, appending to deploys.log) has no open outcome. A trial
    round of `git audit watch` (no `--record`) executed it, and it hung past its timeout: the
    trial records nothing, so that unknown outcome was recorded nowhere, and the next `git
    audit run` deployed a second time with no reconciliation and the gate said PASS (before the
    fix; also with deploy made idempotent in the work tree's plan, which the seal does not).
    A trial now never executes a step that is not idempotent (in the plan file or under the
    sealed contract): the log stays empty until the recorded run deploys, once."""
    deploy = check("sh", "-c", "echo x >> deploys.log; test -e slow && sleep 30; true", timeout=1)
    world.repo.write(".gitignore", "deploys.log\nslow\n")
    world.seal(plan(step("deploy", deploy, idempotent=False, workspace="live")))
    world.repo.git("config", "audit.signingKey", str(world.keys["ci"]))
    if edited:
        world.write_plan(plan(step("deploy", deploy, idempotent=True, workspace="live")))
    (world.path / "slow").write_text("1\n")
    trial = audit(world.path, "watch", "--once", process=True)
    assert "not run: deploy (not-run)" in trial.out, trial.out + trial.err
    log = world.path / "deploys.log"
    assert not log.exists(), "the trial deployed"
    (world.path / "slow").unlink()
    if edited:
        world.write_plan(plan(step("deploy", deploy, idempotent=False, workspace="live")))
    assert audit(world.path, "run", process=True).code == 0
    assert log.read_text() == "x\n"  # one deployment, recorded


def _read_back_under_the_agents_path(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    says: str,
    log: Path | None = None,
) -> None:
    """deploy (not idempotent, live, read back by `grep`; each execution appended to *log*)
    deployed, then timed out: its outcome is unknown. The agent runs `git audit reconcile
    deploy --readback` with a folder of its own first on PATH holding a `grep` that exits 0
    (*says* "pass") or 1: ci's key signs the settlement. PATH is the user's again after."""
    hang = tmp_path / "hang"
    logged = f"echo deployed >> {log}; " if log is not None else ""
    deploy = f"echo deployed > deployed.txt; {logged}test -e {hang} && sleep 30"
    world.repo.write(".gitignore", "deployed.txt\n")
    world.seal(
        plan(
            step(
                "deploy",
                check("sh", "-c", f"{deploy}; exit 0", timeout=0.5),
                idempotent=False,
                readback=[check("grep", "-qx", "deployed", "deployed.txt")],
                workspace="live",
            ),
            step("lint"),
        )
    )
    hang.touch()
    assert world.run().doc["steps"]["deploy"]["status"] == "unknown"
    hang.unlink()
    folder = tmp_path / "agent-bin"
    folder.mkdir()
    (folder / "grep").write_text(f"#!/bin/sh\nexit {0 if says == 'pass' else 1}\n")
    (folder / "grep").chmod(0o755)
    honest = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{folder}:{honest}")
    world.cli("reconcile", "deploy", "--readback", "--key", str(world.keys["ci"]))
    monkeypatch.setenv("PATH", honest)


def _run_until_its_check_sleeps(world: World, step_id: str) -> subprocess.Popen[str]:
    """ci's `git audit run` started in the background, once its check (*step_id*'s `sleep 31`)
    is under way."""
    world.repo.git("config", "audit.signingKey", str(world.keys["ci"]))
    first = subprocess.Popen(
        [sys.executable, "-m", "gitaudit", "run"],
        cwd=world.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while _deploys_in_flight() == 0:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, f"{step_id} never started"
        time.sleep(0.02)
    return first
