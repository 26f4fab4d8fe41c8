"""``gitaudit.gate.plans.check_plan`` called directly: the plan file of the judged tree against
its seal, on states read from a real plans ref (and, for what a verified ref can never hold,
altered in memory the way a tampered or half-written one would be).

End to end (the same refusals through ``git audit status``): ``tests/adversarial/test_plans.py``
and ``tests/adversarial/test_seals.py``.
"""

from __future__ import annotations

import dataclasses
import json

from gitaudit.gate.plans import check_plan
from gitaudit.gate.result import Reason
from gitaudit.ledger.plansref import PlansState, read_state
from gitaudit.ledger.trust import Policy
from gitaudit.plan.store import PlanFile
from tests.adversarial.conftest import STRICT, World, check, plan, step

SOURCE = ".gitaudit/plans/default.json"


def _state(world: World) -> PlansState:
    return read_state(world.handle(), remember=False)


def _file(data: bytes) -> PlanFile:
    return PlanFile("default", SOURCE, data)


def _reasons(state: PlansState, data: bytes | None) -> tuple[Reason, ...]:
    file = None if data is None else _file(data)
    return check_plan(state, "default", file, environment=False).reasons


def _tree_plan(world: World) -> bytes:
    return (world.path / SOURCE).read_bytes()


def test_the_sealed_plan_as_committed_is_in_order(sealed: World) -> None:
    checked = check_plan(_state(sealed), "default", _file(_tree_plan(sealed)), environment=False)
    assert checked.reasons == ()
    assert checked.checked is not None and checked.checked.plan is not None


def test_a_sealed_plan_missing_from_the_tree(sealed: World) -> None:
    assert _reasons(_state(sealed), None) == (
        Reason(
            "plan.missing",
            "plan 'default' is sealed as active but .gitaudit/plans/default.json is not in "
            "this tree",
            "restore the file, or retire the plan: `git audit plan retire default --reason ..`",
        ),
    )


def test_an_invalid_plan_names_its_first_problem_and_counts_the_rest(sealed: World) -> None:
    """Two problems: the first is named with its JSON path and code, the other counted; the
    checked file is returned with them (whoever shows the report needs it)."""
    broken = plan(step("unit", check("true")), step("lint", check("true")))
    broken["steps"][0]["depends_on"] = ["ghost"]
    broken["steps"][1]["covers"] = ["NOPE"]
    data = json.dumps(broken).encode()
    checked = check_plan(_state(sealed), "default", _file(data), environment=False)
    (reason,) = checked.reasons
    assert checked.checked is not None and not checked.checked.report.valid
    errors = checked.checked.report.errors
    assert len(errors) > 1
    first = errors[0]
    assert reason == Reason(
        "plan.invalid",
        f"{first.path}: {first.message} [{first.code}] (+{len(errors) - 1} more)",
        "git audit plan validate --plan default",
    )
    one = json.dumps({"task": "t", "requirements": [], "steps": []}).encode()
    (alone,) = _reasons(_state(sealed), one)
    assert alone.code == "plan.invalid" and not alone.message.endswith("more)"), alone


def test_a_plan_that_differs_from_its_seal_says_how_to_reseal(sealed: World) -> None:
    changed = plan(step("unit", check("true")))
    reasons = _reasons(_state(sealed), json.dumps(changed).encode())
    assert reasons == (
        Reason(
            "plan.differs-from-seal",
            "plan 'default' in this tree differs from its seal v1",
            "reseal (`git audit plan seal --plan default`) or revert the plan file "
            "(`git audit plan inspect` shows what differs)",
        ),
    )


def test_a_sealed_copy_that_does_not_match_its_seal_record(sealed: World) -> None:
    """The plans ref's copy of the plan was replaced by the tree's (changed) plan, its seal
    record left as it was: the copy is not what was sealed."""
    changed = json.dumps(plan(step("unit", check("true")))).encode()
    state = _state(sealed)
    tampered = dataclasses.replace(state, files={**state.files, "plans/default.json": changed})
    assert _reasons(tampered, changed) == (
        Reason(
            "seal.tampered",
            "the sealed copy of plan 'default' does not match its seal record",
            "the plans ref was tampered with; restore it from a good copy",
        ),
    )


def test_a_sealed_copy_missing_from_the_plans_ref(sealed: World) -> None:
    state = _state(sealed)
    files = {k: v for k, v in state.files.items() if k != "plans/default.json"}
    assert _reasons(dataclasses.replace(state, files=files), _tree_plan(sealed)) == (
        Reason(
            "seal.tampered",
            "the sealed copy of plan 'default' is missing",
            "restore refs/audit/plans",
        ),
    )


def test_a_seal_bound_to_another_policy(sealed: World) -> None:
    state = _state(sealed)
    other = Policy(allow_weaken=not state.policy.allow_weaken)
    assert other.digest() != state.policy.digest()
    assert _reasons(dataclasses.replace(state, policy=other), _tree_plan(sealed)) == (
        Reason(
            "seal.policy-mismatch",
            "seal v1 of 'default' binds another policy than policy.json",
            "the plans ref was edited by hand; restore it",
        ),
    )


def test_an_unsealed_or_retired_plan(world: World) -> None:
    world.write_plan(STRICT)
    data = json.dumps(STRICT).encode()
    fix = "git audit plan seal --plan default"
    unsealed = check_plan(_state(world), "default", _file(data), environment=False)
    assert unsealed.reasons == (Reason("plan.unsealed", "plan 'default' is not sealed", fix),)
    assert unsealed.checked is not None and unsealed.checked.report.valid
    world.seal(STRICT)
    state = _state(world)
    record = state.seal("default")
    assert record is not None
    retired = dataclasses.replace(
        state, seals={"default": dataclasses.replace(record, retired=True)}
    )
    assert _reasons(retired, data) == (Reason("plan.unsealed", "plan 'default' is retired", fix),)


def test_a_required_tool_missing_from_path_is_named_with_its_fix(world: World) -> None:
    """The plan requires a tool this machine lacks: the gate says which, and how to fix it, before
    anything else (and a run here FAILs for the same reason)."""
    data = plan(step("unit", check("true")))
    data["required_tools"] = ["gitaudit-no-such-tool"]
    world.seal(data)
    assert world.run().verdict == "FAIL"
    (first, *_) = world.gate().plans[0].reasons
    assert first == Reason(
        "env.missing-tool",
        "required tool 'gitaudit-no-such-tool' is not on PATH",
        "install 'gitaudit-no-such-tool' or add it to PATH; the gate cannot PASS without it",
    )


def test_a_tree_without_any_plan_fails_and_says_how_to_start(world: World) -> None:
    """Nothing sealed, no plan in the tree: FAIL (never PASS for want of anything to check),
    with the one reason and the command that starts."""
    world.repo.write("app.py", "print('hi')\n")
    world.repo.commit("no plan")
    result = world.gate()
    assert result.verdict == "FAIL" and result.plans == ()
    assert result.reasons == (
        Reason("plans.none", "there are no active plans", "create one: `git audit init`"),
    )
