"""Trusted runners per ref: the policy's ``evidence`` rules. With ``refs/heads/main`` proven by
``ci`` alone, evidence signed by any other trusted runner (an agent's own key, a laptop) is
advisory for main: it can fail a tree, never PASS it there. ``min: 2`` needs two distinct
runners that agree. The rule binds ``status --for``, the pre-push hook (memo included) and the
server's pre-receive."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest

from gitaudit.crypto.signers import Signer
from gitaudit.errors import SealError
from gitaudit.hooks.install import install_hooks
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.seals import set_policy
from gitaudit.ledger.trust import EvidenceRule, Policy
from tests.adversarial.conftest import (
    STRICT,
    World,
    assert_plan,
    assert_plans_level,
    check,
    codes,
    only,
    plan,
    runner,
    step,
)
from tests.gitrepo import git

MAIN = "refs/heads/main"


def rule(world: World, *rules: EvidenceRule, allow_weaken: bool = False) -> None:
    current = read_state(world.handle()).policy
    policy = Policy(
        current.protected_refs,
        current.allow_weaken,
        current.commit_msg,
        live_evidence=current.live_evidence,
        max_artifact_bytes=current.max_artifact_bytes,
        agents=current.agents,
        evidence=rules,
    )
    set_policy(world.handle(), world.alice, policy, allow_weaken=allow_weaken, reason="runners")


@pytest.fixture
def ruled(world: World) -> World:
    """main is proven by ci alone; the agent holds a trusted runner key of its own."""
    world.seal(STRICT)
    rule(world, EvidenceRule(MAIN, ("ci",)))
    return world


def test_attack_runner_rules_agent_key_cannot_pass_main(ruled: World) -> None:
    agent = runner(ruled, "agent")
    assert ruled.run(signer=agent).verdict == "PASS"
    assert ruled.gate().verdict == "PASS"  # no ref: any trusted runner's evidence counts
    judged = assert_plan(ruled.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    assert "runs by agent are advisory here" in judged.reasons[0].message
    assert ruled.run().verdict == "PASS"  # ci
    assert ruled.gate(for_ref=MAIN).verdict == "PASS"


@pytest.mark.parametrize(
    "ref", ["refs/heads/main", "refs/heads/release/1.0", "refs/heads/release/2.0/hotfix"]
)
def test_attack_runner_rules_patterns_and_the_most_specific_rule(world: World, ref: str) -> None:
    world.seal(STRICT)
    rule(world, EvidenceRule(MAIN, ("ci",)), EvidenceRule("refs/heads/release/*", ("ci",)))
    agent = runner(world, "agent")
    world.run(signer=agent)
    assert_plan(world.gate(for_ref=ref), "evidence.runner-rule", "UNKNOWN")
    assert world.gate(for_ref="refs/heads/topic").verdict == "PASS"  # no rule for topics


def test_attack_runner_rules_labels_come_from_trust_not_from_the_run(world: World) -> None:
    """The rule names the label ``linux-ci``: a runner is admitted when the *trust set* gives
    it the label. The agent signs (with its own trusted runner key) a run whose run.json claims
    the label: not admitted."""
    world.seal(STRICT)
    rule(world, EvidenceRule(MAIN, ("linux-ci",)))
    agent = runner(world, "agent")
    genuine = world.run(signer=agent)
    assert genuine.commit is not None

    def claim(doc: dict[str, object]) -> None:
        doc["runner"] = {**doc.get("runner", {}), "labels": ["linux-ci"]}  # type: ignore[dict-item]

    world.forge_run(genuine.commit, edit=claim, signer=agent)
    assert_plan(world.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    builder = runner(world, "builder", frozenset({"linux-ci"}))
    assert world.run(signer=builder).verdict == "PASS"
    assert world.gate(for_ref=MAIN).verdict == "PASS"


def test_attack_runner_rules_min_two_needs_two_distinct_runners(world: World) -> None:
    world.seal(STRICT)
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    world.run()
    world.run()  # the same runner twice is one runner
    judged = assert_plan(world.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    assert "passing runs for this tree by ci;" in judged.reasons[0].message + ";"
    assert judged.reasons[0].hint == (
        "have 2 runners of ci, ci2 run the plan on this commit (e.g. in CI: "
        "`git audit run --plan default` then `git audit push`), then `git audit sync`"
    )
    world.run(signer=second)
    assert world.gate(for_ref=MAIN).verdict == "PASS"


def test_attack_runner_rules_a_failing_run_is_not_agreement(world: World) -> None:
    """Two runners must both have PASSed this tree: ci2's run, made FAIL by its own signed
    verdict, is not a second agreeing runner."""
    world.seal(STRICT)
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    passed = world.run()
    assert passed.commit is not None

    def failed(doc: dict[str, object]) -> None:
        doc["verdict"] = "FAIL"

    world.forge_run(passed.commit, edit=failed, signer=second)
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict != "PASS"
    assert "evidence.runner-rule" in codes(judged) or "step.failed" in codes(judged)


@pytest.mark.parametrize(
    ("change", "weakening"),
    [
        ((), "evidence rule for refs/heads/main removed"),
        ((EvidenceRule(MAIN, ("ci", "agent")),), "also from agent"),
    ],
)
def test_attack_runner_rules_relaxing_is_a_weakening(
    ruled: World, change: tuple[EvidenceRule, ...], weakening: str
) -> None:
    from gitaudit.errors import SealError

    with pytest.raises(SealError) as refused:
        rule(ruled, *change)
    assert weakening in refused.value.message


def test_attack_runner_rules_lowering_min_is_a_weakening(world: World) -> None:
    from gitaudit.errors import SealError

    world.seal(STRICT)
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    with pytest.raises(SealError) as refused:
        rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 1))
    assert "needs 1 runners, not 2" in refused.value.message


HEADS = EvidenceRule("refs/heads/*", ("ci",))
RELEASE = "refs/heads/release/1.0"
GOVERNED = "governed by the rule for refs/heads/* before,"

# id: (the rules while weakening is forbidden, the rule a sealer adds, the ref it relaxes, why)
NARROWER_RULES = {
    "main-under-heads": (
        (HEADS,),
        EvidenceRule(MAIN, ("agent",)),
        MAIN,
        f"evidence for refs/heads/main, {GOVERNED} also from agent",
    ),
    "a-glob-under-heads": (
        (HEADS,),
        EvidenceRule("refs/heads/ma*", ("agent", "ci")),
        MAIN,
        f"evidence for refs/heads/ma*, {GOVERNED} also from agent",
    ),
    "a-longer-glob-over-release": (
        (HEADS, EvidenceRule("refs/heads/release/*", ("ci",))),
        EvidenceRule("refs/heads/rel*ease/*", ("agent",)),
        RELEASE,
        "evidence for refs/heads/rel*ease/*, governed by the rule for refs/heads/release/* "
        "before, also from agent",
    ),
    "a-lower-min-for-main": (
        (EvidenceRule("refs/heads/*", ("agent", "ci"), 2),),
        EvidenceRule(MAIN, ("agent", "ci")),
        MAIN,
        f"evidence for refs/heads/main, {GOVERNED} needs 1 runners, not 2",
    ),
}


@pytest.mark.parametrize("case", list(NARROWER_RULES))
def test_attack_runner_rules_narrower_rule_relaxes_the_refs_it_takes(
    world: World, case: str
) -> None:
    """The policy forbids weakening and `refs/heads/*` is proven by ci alone (or by two of ci
    and the agent). A sealer adds a rule for narrower refs (`refs/heads/main`, `refs/heads/ma*`,
    a glob longer than `refs/heads/release/*` matching the same refs) that admits the agent's
    runner, or asks one runner. The gate judges a ref by its most specific rule, so the agent's
    own run proved those refs; the policy was compared rule by rule on the old patterns, found
    nothing laxer, and `trust policy` and the chain took it. A rule relaxes every ref it takes
    from an old rule that admitted less."""
    old, added, ref, words = NARROWER_RULES[case]
    world.seal(STRICT)
    agent = runner(world, "agent")
    locked = replace(read_state(world.handle()).policy, allow_weaken=False, evidence=old)
    set_policy(world.handle(), world.alice, locked, allow_weaken=False, reason="locked")
    assert world.run(signer=agent).verdict == "PASS"
    assert world.gate(for_ref=ref).verdict == "UNKNOWN"  # the agent's run does not prove ref
    lax = replace(locked, evidence=(*old, added))
    for allow in (False, True):
        with pytest.raises(SealError) as refused:
            set_policy(world.handle(), world.alice, lax, allow_weaken=allow, reason="narrower")
        assert "policy.json forbids weakening" in refused.value.message
        assert words in refused.value.message, refused.value.message
    files = world.plans_files()  # the same policy in a plans commit alice signs by hand
    files["policy.json"] = dumps(lax.to_json())
    for path in [p for p in files if p.startswith("seals/")]:
        files[path] = dumps({**json.loads(files[path]), "policy_digest": lax.digest()})
    world.forge_plans(files, world.alice)
    result = world.gate(for_ref=ref)
    assert_plans_level(result, "plans.untrusted")
    assert "relaxes a policy that forbids weakening" in result.reasons[0].message
    assert words in result.reasons[0].message


def test_attack_runner_rules_memo_of_a_ruleless_pass_does_not_answer_for_main(
    ruled: World, tmp_path: Path
) -> None:
    """The agent's own runner key makes `git audit status` PASS (remembered in the memo); the
    pre-push hook must still judge the push to main by main's rule, not serve that PASS."""
    agent = runner(ruled, "agent")
    ruled.run(signer=agent)
    assert ruled.cli("status").code == 0  # remembered, for no ref
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    ruled.repo.git("remote", "add", "origin", str(server))
    install_hooks(ruled.handle())
    pushed = subprocess.run(
        ["git", "push", "origin", "HEAD:refs/heads/main"],
        cwd=ruled.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0, pushed.stderr
    assert "evidence.runner-rule" in pushed.stderr or "takes evidence from ci" in pushed.stderr
    topic = subprocess.run(
        ["git", "push", "origin", "HEAD:refs/heads/topic"],
        cwd=ruled.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert topic.returncode == 0, topic.stderr  # no rule for topics: the agent's PASS counts


def _push_main(world: World, *refs: str) -> subprocess.CompletedProcess[str]:
    """`git push --no-verify --atomic` of HEAD to main with the default plan's runs (and
    *refs*): no client hook on the way, so the server's pre-receive alone decides."""
    main = ["origin", "HEAD:refs/heads/main", "refs/audit/runs/default"]
    return subprocess.run(
        ["git", "push", "--no-verify", "--atomic", *main, *refs],
        cwd=world.path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_attack_runner_rules_server_declines_main_without_ci(ruled: World, tmp_path: Path) -> None:
    agent = runner(ruled, "agent")
    server = ruled.serve(tmp_path / "server.git")
    ruled.run(signer=agent)
    pushed = _push_main(ruled)
    assert pushed.returncode != 0
    assert "pre-receive hook declined" in pushed.stderr
    assert "takes evidence from ci" in pushed.stderr
    assert git(server, "rev-parse", "-q", "--verify", "refs/heads/main", check=False) == ""
    ruled.run()  # ci, the runner main trusts
    again = _push_main(ruled)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("spelling", ["refs/heads/MAIN", "refs/heads/Main"])
def test_attack_runner_rules_main_spelt_in_another_case_on_the_server(
    ruled: World, tmp_path: Path, spelling: str
) -> None:
    """main is proven by ci alone. The agent pushes its own PASS run with the commit as
    `refs/heads/MAIN`: refs/heads/* protects it, but the rule for refs/heads/main did not apply
    to that name, so the agent's run proved it and the server took it (before the fix); where
    the server's file system ignores case, that push moved main itself. A name a pattern of the
    policy matches only when case is ignored is refused."""
    agent = runner(ruled, "agent")
    server = ruled.serve(tmp_path / "server.git")
    ruled.run(signer=agent)
    pushed = subprocess.run(
        ["git", "push", "--no-verify", "origin", f"HEAD:{spelling}", "refs/audit/runs/default"],
        cwd=ruled.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0, pushed.stderr
    assert f"rejecting {spelling}: the policy's 'refs/heads/main' matches it only" in pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert git(server, "rev-parse", "-q", "--verify", spelling, check=False) == ""


def test_runner_rules_status_for_names_the_rule(ruled: World) -> None:
    """Control: `status --for` explains itself, and takes full ref names only."""
    ruled.run()
    ok = ruled.cli("status", "--for", MAIN)
    assert ok.code == 0, ok.out
    bad = ruled.cli("status", "--for", "main")
    assert bad.code == 2 and "--for refs/heads/main" in bad.err


def test_attack_runner_rules_status_served_from_the_memo_keeps_the_rule(ruled: World) -> None:
    """`git audit status` is served from the verdict memo when it can: a PASS remembered for no
    ref (the agent's own evidence) must not answer `status --for refs/heads/main`."""
    agent = runner(ruled, "agent")
    ruled.run(signer=agent)
    assert ruled.cli("status").code == 0
    assert ruled.cli("status").code == 0  # served from the memo now
    ruled_status = ruled.cli("status", "--for", MAIN)
    assert ruled_status.code == 3, ruled_status.out
    assert "takes evidence from ci" in ruled_status.out


# ---------------------------------------------------------------- advisory runs supply no content


def _flaky(world: World, flag: Path) -> None:
    """The plan: unit greps *flag*, a file outside the tree (a flaky or now-failing check), so
    the same tree can PASS, then FAIL; main takes ci's evidence only."""
    flag.write_text("pass\n")
    world.seal(plan(step("unit", check("grep", "-qx", "pass", str(flag))), step("lint")))
    rule(world, EvidenceRule(MAIN, ("ci",)))


def _ci_failed_last(world: World, agent: Signer, flag: Path) -> None:
    assert world.run().verdict == "PASS"
    flag.write_text("fail\n")
    assert world.run().verdict == "FAIL"  # ci's newest word on this tree
    flag.write_text("pass\n")
    assert world.run(signer=agent).verdict == "PASS"


def _ci_failed_a_targeted_rerun(world: World, agent: Signer, flag: Path) -> None:
    assert world.run().verdict == "PASS"
    flag.write_text("fail\n")
    assert world.run(targets=["unit"]).verdict == "FAIL"
    flag.write_text("pass\n")
    assert world.run(signer=agent, targets=["unit"]).verdict == "PASS"


def _ci_carries_the_agents_step(world: World, agent: Signer, flag: Path) -> None:
    assert world.run(signer=agent).verdict == "PASS"
    # made while no rule admitted ci (or by an earlier gitaudit, which carried from any trusted
    # runner's run under a rule too): ci executes unit, lint is carried from the agent's run
    rule(world, allow_weaken=True)
    ran = world.run(targets=["unit"])
    rule(world, EvidenceRule(MAIN, ("ci",)))
    assert ran.verdict == "PASS"
    assert ran.doc["steps"]["lint"]["status"] == "carried"


def _ci_passed_an_older_contract(world: World, agent: Signer, flag: Path) -> None:
    assert world.run().verdict == "PASS"
    stronger = plan(
        step("unit", check("grep", "-qx", "pass", str(flag))), step("lint"), step("docs")
    )
    world.seal(stronger)  # a new contract (and the tree with its plan file)
    assert world.run(signer=agent).verdict == "PASS"


ADVISORY_CONTENT = {
    "ci-failed-last": (_ci_failed_last, "FAIL"),
    "ci-failed-a-targeted-rerun": (_ci_failed_a_targeted_rerun, "FAIL"),
    "ci-carries-the-agents-step": (_ci_carries_the_agents_step, "UNKNOWN"),
    "ci-passed-an-older-contract": (_ci_passed_an_older_contract, "UNKNOWN"),
}


@pytest.mark.parametrize("variant", sorted(ADVISORY_CONTENT))
def test_attack_runner_rules_advisory_runs_supply_no_content(
    world: World, tmp_path: Path, variant: str
) -> None:
    """main takes ci's evidence; the agent holds a runner key of its own (advisory for main).
    ci's own newest word on the tree is a FAIL, or ci proved only part of it (a step it carried
    from the agent's run), or ci proved another contract; the agent's passing run is the newest.
    Before, any passing ci run of the tree admitted it while the content was judged from the
    newest run overall, the agent's: main PASSed, and the server took the push. Now main is
    judged from ci's runs alone: FAIL when ci's newest outcome failed, UNKNOWN when ci did not
    prove every step itself."""
    scenario, verdict = ADVISORY_CONTENT[variant]
    flag = tmp_path / "flag"
    _flaky(world, flag)
    agent = runner(world, "agent")
    server = world.serve(tmp_path / "server.git")
    scenario(world, agent, flag)
    assert world.gate().verdict == "PASS"  # no ref: the agent's evidence counts
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict == verdict, judged.reasons
    status = world.cli("status", "--for", MAIN)
    assert status.code == (1 if verdict == "FAIL" else 3), status.out
    pushed = _push_main(world, "refs/audit/plans")
    assert pushed.returncode != 0, pushed.stderr
    assert "pre-receive hook declined" in pushed.stderr
    assert git(server, "rev-parse", "-q", "--verify", "refs/heads/main", check=False) == ""


def test_runner_rules_control_ci_evidence_with_advisory_runs_around_it(
    world: World, tmp_path: Path
) -> None:
    """Control: ci's honest evidence still proves main with the agent's runs before and after
    it, a ci failure mended by a newer ci pass, and ci's targeted runs composed (each carrying
    from ci's own); the server takes the push."""
    flag = tmp_path / "flag"
    _flaky(world, flag)
    agent = runner(world, "agent")
    server = world.serve(tmp_path / "server.git")
    assert world.run(signer=agent).verdict == "PASS"
    flag.write_text("fail\n")
    assert world.run().verdict == "FAIL"
    flag.write_text("pass\n")
    assert world.run(targets=["lint"]).verdict == "UNKNOWN"  # unit's newest outcome failed
    assert world.run(targets=["unit"]).verdict == "PASS"  # lint carried from ci's own run
    assert world.run(signer=agent).verdict == "PASS"
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict == "PASS", judged.reasons
    said = "passing runs for this tree by ci; runs by agent are advisory here"
    assert any(said in note for note in judged.notes), judged.notes
    pushed = _push_main(world)
    assert pushed.returncode == 0, pushed.stderr
    assert git(server, "rev-parse", "-q", "--verify", "refs/heads/main", check=False) != ""


def test_runner_rules_control_admitted_runners_carry_from_each_other(
    world: World, tmp_path: Path
) -> None:
    """Control: main takes evidence from the runners labelled ``linux-ci`` (two CI machines,
    each with its own key). One runs unit, the other lint, carrying unit from the first: both
    are admitted, so the carried step counts and main PASSes."""
    flag = tmp_path / "flag"
    flag.write_text("pass\n")
    world.seal(plan(step("unit", check("grep", "-qx", "pass", str(flag))), step("lint")))
    first = runner(world, "ci-a", frozenset({"linux-ci"}))
    second = runner(world, "ci-b", frozenset({"linux-ci"}))
    rule(world, EvidenceRule(MAIN, ("linux-ci",)))
    assert world.run(signer=first, targets=["unit"]).verdict == "UNKNOWN"  # lint not run
    ran = world.run(signer=second, targets=["lint"])
    assert ran.verdict == "PASS"
    assert ran.doc["steps"]["unit"]["status"] == "carried"
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict == "PASS", judged.reasons


@pytest.mark.parametrize(
    "ci_runs", ["every step (unit's inputs unchanged)", "lint alone", "as gitaudit did before"]
)
def test_attack_runner_rules_min_two_agreed_by_a_carried_pass(
    world: World, tmp_path: Path, ci_runs: str
) -> None:
    """main needs 2 of ci and the agent's own runner key to agree. unit's check reads a flag
    outside the repository: on the agent's machine it says pass, on ci's it says fail. The
    agent runs the plan: PASS. ci runs the tree, as its job does (every step, or lint alone):
    its run carried unit's pass from the agent's run (the rule admits both, and unit's inputs
    are unchanged), executed nothing that fails and said PASS; the gate counted it as ci's
    agreement: PASS for main with unit executed by the agent alone (all three variants before
    the fix). A runner admitted by a rule asking several runners now carries only its own
    passes (its run executes unit, and fails; or leaves it not run), and the gate counts a
    passing run as agreement only when every step it carried came from that runner's own runs
    (a run written as before: `evidence.runner-rule`, UNKNOWN)."""
    from gitaudit.run import recorder

    flag = tmp_path / "flag"
    flag.write_text("pass\n")
    world.repo.write("src/a.txt", "a\n")
    unit = step("unit", check("grep", "-qx", "pass", str(flag)), inputs=["src/**"])
    world.seal(plan(unit, step("lint")))
    agent = runner(world, "agent")
    rule(world, EvidenceRule(MAIN, ("ci", "agent"), 2))
    assert world.run(signer=agent).verdict == "PASS"
    flag.write_text("fail\n")  # ci's machine
    if ci_runs == "as gitaudit did before":
        every_runner = [k.key for k in read_state(world.handle()).trust.keys if k.may("runner")]
        with mock.patch.object(recorder, "_carry_sources", lambda prep: every_runner):
            ran = world.run()
        assert ran.verdict == "PASS" and ran.doc["steps"]["unit"]["status"] == "carried"
    else:
        ran = world.run(targets=["lint"] if ci_runs == "lint alone" else ())
        assert ran.doc["steps"]["unit"]["status"] in ("failed", "not-run"), ran.doc
        assert ran.verdict != "PASS"
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict != "PASS", judged
    if ci_runs == "as gitaudit did before":
        assert codes(judged) == ["evidence.runner-rule"], judged.reasons
        message = judged.reasons[0].message
        assert "passing runs for this tree by agent;" in message, message
        assert "the passing runs by ci carried steps another runner executed" in message
    status = world.cli("status", "--for", MAIN, "--json")
    assert status.code != 0 and status.json()["verdict"] != "PASS", status.out


def test_runner_rules_control_min_two_agreed_by_runs_carrying_their_own_passes(
    world: World,
) -> None:
    """Control: main needs 2 of ci and ci2. Each runs unit alone, then lint alone, carrying its
    own pass of unit (and ci2 runs after ci, whose passes it does not take): both agree, main
    PASSes."""
    world.seal(STRICT)
    second = runner(world, "ci2")
    rule(world, EvidenceRule(MAIN, ("ci", "ci2"), 2))
    for signer in (world.ci, second):
        world.run(signer=signer, targets=["unit"])
        ran = world.run(signer=signer, targets=["lint"])
        assert ran.verdict == "PASS" and ran.doc["steps"]["unit"]["status"] == "carried"
    judged = only(world.gate(for_ref=MAIN))
    assert judged.verdict == "PASS", judged.reasons
    assert "passing runs for this tree by ci, ci2" in " ".join(judged.notes), judged.notes
