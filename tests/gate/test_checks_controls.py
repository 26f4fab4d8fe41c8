"""What a plan opens beyond the tree, as the gate sees it (docs/threat-model.md, "Checks run on the
tree"): :func:`gitaudit.gate.evidence.judge_evidence` called directly on a runner's genuine
evidence. Steps that ran in the live work tree are noted and refusable by the policy; declared
ignored paths are noted and re-checked when the work tree is what is judged.

End to end: tests/adversarial/test_hermetic.py."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from gitaudit.gate.evidence import Evidence, Judging, judge_evidence
from gitaudit.gate.result import Reason
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.seals import set_policy
from gitaudit.plan.catalog import check_worktree
from gitaudit.verdict import Verdict
from tests.adversarial.conftest import World, check, plan, step


def evidence(world: World, *, workdir: bool = False) -> Evidence:
    repo = world.handle()
    (checked,) = check_worktree(world.path, "default")
    assert checked.plan is not None
    tree = str(repo.git.revparse_single("HEAD^{tree}").id)
    judging = Judging(
        repo,
        read_state(repo),
        "default",
        checked.plan,
        tree,
        time.time(),
        None,
        dict,
        workdir=world.path if workdir else None,
    )
    return judge_evidence(judging)


def test_live_steps_are_noted_and_refusable_by_the_policy(world: World) -> None:
    world.seal(plan(step("unit", check("true"), workspace="live"), step("lint", check("true"))))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    assert recorded.doc["steps"]["unit"]["workspace"] == "live"
    assert recorded.doc["steps"]["lint"]["workspace"] == "checkout"
    allowed = evidence(world)
    assert allowed.reasons == ()
    assert allowed.notes == ("step(s) unit ran in the live work tree (workspace: live)",)
    handle = world.handle()
    refuse = replace(read_state(handle).policy, live_evidence="refuse")
    set_policy(handle, world.alice, refuse, allow_weaken=False, reason=None)
    refused = evidence(world)
    assert refused.reasons == (
        Reason(
            "evidence.live-refused",
            "the policy refuses evidence from the live work tree, and step(s) unit of plan "
            "'default' ran there",
            "run those steps in the private checkout (remove `workspace: live` and reseal), "
            "then `git audit run --plan default`",
        ),
    )


def test_a_carried_live_step_is_noted_and_refusable_as_one_that_ran(world: World) -> None:
    """unit is carried (lint alone ran): its pass is still the live work tree's."""
    world.seal(plan(step("unit", check("true"), workspace="live", inputs=["src"]), step("lint")))
    assert world.run().verdict == "PASS"
    carried = world.run(targets=["lint"])
    assert carried.doc["steps"]["unit"]["status"] == "carried"
    assert evidence(world).notes == ("step(s) unit ran in the live work tree (workspace: live)",)
    handle = world.handle()
    refuse = replace(read_state(handle).policy, live_evidence="refuse")
    set_policy(handle, world.alice, refuse, allow_weaken=False, reason=None)
    assert [r.code for r in evidence(world).reasons] == ["evidence.live-refused"]


def test_declared_ignored_paths_are_noted_and_rechecked(world: World) -> None:
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "ok\n")
    world.seal(
        plan(step("unit", check("grep", "-qx", "ok", "tools/verdict")))
        | {"ignored_paths": ["tools"]}
    )
    assert world.run().verdict == "PASS"
    judged = evidence(world, workdir=True)
    assert judged.reasons == ()
    assert judged.notes == ("relied on ignored path(s) tools",)
    world.repo.write("tools/verdict", "changed after the run\n")
    changed = evidence(world, workdir=True)
    assert changed.reasons == (
        Reason(
            "evidence.ignored-changed",
            "the declared ignored path 'tools' changed since the run that proved plan 'default'",
            "git audit run --plan default",
            verdict=Verdict.UNKNOWN,
        ),
    )
    # a commit judged without its work tree (a push, `status <rev>`) has no ignored files to see
    assert evidence(world).reasons == ()


def test_a_carry_from_a_run_that_listed_an_ignored_path_otherwise_is_refused(
    world: World,
) -> None:
    """Judged without a work tree (as a server does), a run that carries unit's pass and lists
    the declared ignored path otherwise than the run it came from: the carry does not hold,
    whatever the work tree says; listed alike, it does."""
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "ok\n")
    world.seal(
        plan(step("unit", check("grep", "-qx", "ok", "tools/verdict")), step("lint"))
        | {"ignored_paths": ["tools"]}
    )
    passed = world.run()
    assert passed.verdict == "PASS"
    for digest, codes in ((None, []), ("sha256:" + "0" * 64, ["evidence.carried-invalid"])):

        def carried(doc: dict[str, Any], digest: str | None = digest) -> None:
            if digest is not None:
                doc["workspace"]["ignored_paths"]["tools"]["digest"] = digest
            doc["steps"]["unit"].update(
                status="carried", carried_from=passed.commit, attempt=None, checks=[]
            )

        world.forge_run(passed.commit, edit=carried, signer=world.ci, parent=passed.commit)
        assert [r.code for r in evidence(world).reasons] == codes
