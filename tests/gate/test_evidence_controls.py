"""Controls of docs/threat-model.md at the unit level, on the gate's own functions: the per-ref
runner rule (the evidence judge with a rule, :mod:`gitaudit.gate.runners`), the
request checks (:mod:`gitaudit.gate.request`), evidence bound to the tree
(:func:`gitaudit.gate.evidence.judge_evidence`), and the hooks' functions called in-process
(:func:`gitaudit.hooks.entry.pre_push`, :func:`gitaudit.hooks.entry.pre_receive`).

End to end (through the CLI, real pushes and the CI recipes): ``tests/e2e/test_hooks.py``,
``tests/e2e/test_ci_runner.py`` and ``tests/adversarial/``.
"""

from __future__ import annotations

import time

import pytest

from gitaudit.gate.evidence import Evidence, Judging, judge_evidence
from gitaudit.gate.plans import check_plan
from gitaudit.gate.request import request_reason, requested_names
from gitaudit.hooks import entry
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import PlansState, read_state
from gitaudit.ledger.refs import runs_ref
from gitaudit.ledger.request_ops import seal_request
from gitaudit.ledger.runs import read_run
from gitaudit.ledger.trust import EvidenceRule
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.model import Plan
from gitaudit.verdict import Verdict
from tests.adversarial.conftest import STRICT, World, check, plan, runner, step
from tests.adversarial.test_request import PLAN, R1, R2, REQUEST, Asked
from tests.adversarial.test_runner_rules import rule

MAIN = "refs/heads/main"
RUNS = runs_ref("default")
ZERO = "0" * 40


def _state(world: World) -> PlansState:
    return read_state(world.handle(), remember=False)


def _model(world: World, name: str = "default") -> Plan:
    (checked,) = check_worktree(world.path, name)
    assert checked.plan is not None
    return checked.plan


def _head_tree(world: World) -> str:
    return str(world.handle().git.revparse_single("HEAD^{tree}").id)


def _evidence(world: World, *, ref: str | None = None) -> Evidence:
    repo = world.handle()
    state = read_state(repo)
    judging = Judging(
        repo,
        state,
        "default",
        _model(world),
        _head_tree(world),
        time.time(),
        None,
        dict,
        ref=ref,
        rule=state.policy.evidence_rule(ref),
    )
    return judge_evidence(judging)


# --------------------------------------------------------------------- trusted runners per ref


def test_only_the_runners_a_ref_names_prove_a_tree_for_it(world: World) -> None:
    """main takes evidence from ci alone (the CI recipes' `trust policy --evidence
    refs/heads/main=ci`); the agent holds a runner key of its own. Its passing run is advisory
    for main (UNKNOWN there) and proves the tree for a ref without a rule; ci's run is admitted;
    a run of ci's that FAILs makes main FAIL (the gate judges when the runner failed)."""
    world.seal(STRICT)
    main = EvidenceRule(MAIN, ("ci",))
    rule(world, main)
    agent = runner(world, "agent")
    assert world.run(signer=agent).verdict == "PASS"
    judged = _evidence(world, ref=MAIN)
    assert [r.code for r in judged.reasons] == ["evidence.runner-rule"]
    assert judged.reasons[0].verdict == Verdict.UNKNOWN
    assert judged.reasons[0].message == (
        "plan 'default': refs/heads/main takes evidence from ci (1 distinct runner): passing "
        "runs for this tree by none; runs by agent are advisory here"
    )
    assert _evidence(world, ref="refs/heads/topic").reasons == ()  # no rule there
    assert world.run().verdict == "PASS"  # ci
    admitted = _evidence(world, ref=MAIN)
    assert admitted.reasons == ()
    assert admitted.notes[-1] == (
        "refs/heads/main takes evidence from ci (1 distinct runner): passing runs for this tree "
        "by ci; runs by agent are advisory here"
    )
    world.write_plan(plan(step("unit", check("false")), step("lint", check("true"))))
    world.seal(allow_weaken=True, reason="a failing check")
    assert world.run().verdict == "FAIL"  # ci's own run fails
    failed = _evidence(world, ref=MAIN)
    assert failed.reasons and failed.reasons[0].code == "step.failed"
    assert failed.reasons[0].verdict == Verdict.FAIL


def test_a_rules_agreement_expires_with_the_runs_it_counted(world: World) -> None:
    """main needs ci and ci2; unit is valid for an hour. The evidence lasts until the run of the
    runner whose agreement expires first (ci2's, the older), not until that of the newest run,
    whose steps alone are judged: whoever remembers the PASS must judge it again then. With
    three agreeing runners where two must agree, it lasts until the second one expires."""
    world.seal(plan(step("unit", valid_for="1h")))
    second, third = runner(world, "ci2"), runner(world, "ci3")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2", "ci3"), 2))
    older = world.run(signer=second)
    time.sleep(1.1)  # signed a second apart at least
    newer = world.run()
    judged = _evidence(world, ref=MAIN)
    assert judged.reasons == ()
    git = world.handle().git
    # counted from when each run's checks began (its signed started_at), which is a second
    # before its commit time when the run crossed a second's boundary
    began = {r.commit: read_run(git, r.commit).began for r in (older, newer) if r.commit}
    assert judged.until == began[older.commit] + 3600
    latest = world.run(signer=third)
    assert latest.commit is not None
    assert _evidence(world, ref=MAIN).until == began[newer.commit] + 3600


def test_a_runner_a_rule_admits_carries_only_what_that_rule_admits(world: World) -> None:
    """Carrying by unchanged inputs under a rule: ci (admitted for main) does not carry the
    agent's passes, which main would not take (its run would prove nothing there, and its
    record would say carried); it executes the steps, and carries from its own runs after. The
    agent, which no rule admits, still carries from any trusted runner's runs."""
    world.repo.write("src/app.txt", "v1\n")
    world.seal(
        plan(
            step("unit", check("true"), inputs=["src/**"]),
            step("lint", check("true"), inputs=["src/**"]),
        )
    )
    rule(world, EvidenceRule(MAIN, ("ci",)))
    agent = runner(world, "agent")
    assert world.run(signer=agent).verdict == "PASS"
    first = world.run()  # ci
    assert {sid: e["status"] for sid, e in first.doc["steps"].items()} == {
        "unit": "passed",
        "lint": "passed",
    }
    assert _evidence(world, ref=MAIN).reasons == ()
    again = world.run()  # ci again: its own passes carry
    assert {e["status"] for e in again.doc["steps"].values()} == {"carried"}
    assert _evidence(world, ref=MAIN).reasons == ()
    carried = world.run(signer=agent)  # the agent carries from any trusted runner's run
    assert {e["status"] for e in carried.doc["steps"].values()} == {"carried"}


# ---------------------------------------------------------------------------- the user's request


@pytest.fixture
def asked(world: World) -> Asked:
    """alice sealed the request (R1, R2); the planner `agent` sealed PLAN answering it."""
    from gitaudit.crypto.keystore import generate_key, load_signer
    from gitaudit.ledger.seals import trust_add

    generated = generate_key("agent")
    agent = load_signer(generated.private_path)
    trust_add(world.handle(), world.alice, agent.public_key, "planner", "agent")
    out = Asked(world, agent, generated.private_path)
    assert out.request(REQUEST).commit is not None
    assert out.seal(PLAN).commit is not None
    world.repo.commit("the plan and the request")
    return out


def _asked_reason(world: World) -> tuple[str, str] | None:
    found = request_reason(
        world.handle(), _state(world), "default", _model(world), _head_tree(world)
    )
    return None if found is None else (found.code, found.message)


def test_a_changed_request_is_unanswered_until_answered(asked: Asked) -> None:
    world = asked.world
    assert _asked_reason(world) is None  # the control: the sealed plan answers
    r3 = {"id": "R3", "description": "it is fast", "priority": "must"}
    asked.request({**REQUEST, "requirements": [R1, R2, r3]}, reason="also fast")
    world.repo.commit("request R3")
    assert _asked_reason(world) == (
        "request.unanswered",
        "plan 'default' (seal v1) does not answer request v2: request requirement R3 (must) "
        "is not among the plan's requirements",
    )
    answering = {**PLAN, "requirements": [R1, R2, r3]}
    answering["steps"] = [*PLAN["steps"], step("fast", check("true"), covers=["R3"])]
    assert asked.seal(answering).commit is not None
    world.repo.commit("the plan answers R3")
    assert _asked_reason(world) is None


def test_a_request_file_edited_in_the_tree_differs(asked: Asked) -> None:
    world = asked.world
    world.repo.write_json(".gitaudit/requests/default.json", {"task": "x", "requirements": [R1]})
    world.repo.commit("a smaller request")
    assert _asked_reason(world) == (
        "request.differs-from-seal",
        "the request .gitaudit/requests/default.json in this tree differs from its seal v1",
    )


def test_a_request_sealed_with_no_plan_is_unplanned(world: World) -> None:
    world.seal(STRICT)
    seal_request(world.handle(), world.alice, "asked", dumps(REQUEST), source="asked.json")
    state = _state(world)
    assert "asked" in requested_names(world.handle(), state, _head_tree(world))
    reasons = check_plan(state, "asked", None, environment=False).reasons
    assert [(r.code, r.verdict, r.message) for r in reasons] == [
        (
            "request.unplanned",
            Verdict.FAIL,
            "request v1 of plan 'asked' is sealed, but no plan answering it is",
        )
    ]


# ----------------------------------------------------------------------- evidence binds the tree


def _receive(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *lines: str
) -> tuple[int, str]:
    """The server's pre-receive, as git runs it in the repository receiving *lines*."""
    monkeypatch.setenv("GIT_DIR", str(world.handle().gitdir))
    capsys.readouterr()
    code = entry.pre_receive([], "".join(line + "\n" for line in lines))
    monkeypatch.delenv("GIT_DIR")
    return code, capsys.readouterr().err


def _push(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """The client's pre-push for HEAD to main, as git runs it in the work tree."""
    sha = world.repo.git("rev-parse", "HEAD").strip()
    monkeypatch.chdir(world.path)
    capsys.readouterr()
    code = entry.pre_push(["origin", "x"], f"refs/heads/main {sha} {MAIN} {ZERO}\n")
    return code, capsys.readouterr().err


def test_evidence_for_another_tree_is_refused_by_the_hooks(
    proven: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ci's PASS is for HEAD's tree; a commit with one more file is another tree: no evidence
    (UNKNOWN) for the evidence judge and pre-push, refused by pre-receive although the ledger
    with the PASS run is pushed with it."""
    passed = _evidence(proven)
    assert passed.reasons == () and passed.record is not None
    old_tree = passed.record.tree
    assert _push(proven, capsys, monkeypatch)[0] == 0  # the control
    proven.repo.write("notes.md", "a file without evidence\n")
    sha = proven.repo.commit("another tree")
    assert _head_tree(proven) != old_tree
    judged = _evidence(proven)
    assert [(r.code, r.verdict) for r in judged.reasons] == [("evidence.missing", Verdict.UNKNOWN)]
    assert judged.record is None
    code, err = _push(proven, capsys, monkeypatch)
    assert code == 1
    assert "gitaudit: push of refs/heads/main" in err and "UNKNOWN" in err
    tip = proven.ref(RUNS)  # the update's old value is what the receiving side holds
    code, err = _receive(proven, capsys, monkeypatch, f"{tip} {tip} {RUNS}", f"{ZERO} {sha} {MAIN}")
    assert code == 1
    assert f"no evidence for tree {_head_tree(proven)[:12]}" in err
    assert "rejecting refs/audit/runs/default" not in err  # the ledger itself is genuine


def test_a_failing_check_blocks_pre_push_and_pre_receive(
    world: World,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check that fails for the new tree: pre-push blocks (FAIL), and with the hook skipped
    (`--no-verify`) pre-receive refuses the branch while the failing evidence may travel."""
    world.seal(plan(step("unit", check("sh", "-c", "test ! -e BROKEN")), step("lint")))
    assert world.run().verdict == "PASS"
    assert _push(world, capsys, monkeypatch)[0] == 0  # the control
    world.repo.write("BROKEN", "yes\n")
    sha = world.repo.commit("break it")
    assert world.run().verdict == "FAIL"
    code, err = _push(world, capsys, monkeypatch)
    assert code == 1
    assert f"push of refs/heads/main to refs/heads/main ({sha[:12]})" in err
    assert "FAIL" in err and "step unit failed" in err
    tip = world.ref(RUNS)  # the update's old value is what the receiving side holds
    code, err = _receive(world, capsys, monkeypatch, f"{tip} {tip} {RUNS}", f"{ZERO} {sha} {MAIN}")
    assert code == 1
    assert f"update of {MAIN} to {sha[:12]}" in err and "step unit failed" in err
    assert "rejecting refs/audit/runs/default" not in err
