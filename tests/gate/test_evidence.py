"""``gitaudit.gate.evidence.judge_evidence`` called directly: what it finds in a runner-signed run
it does not take from the run's own word.

End to end (the same situations through ``git audit status``): ``tests/adversarial/``.
"""

from __future__ import annotations

import time
from typing import Any

from gitaudit.gate.evidence import Evidence, Judging, judge_evidence
from gitaudit.gate.result import Reason
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import runs_ref
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import World, check, step

RUNS = runs_ref("default")


def _evidence(world: World) -> Evidence:
    repo = world.handle()
    (checked,) = check_worktree(world.path, "default")
    assert checked.plan is not None
    tree = str(repo.git.revparse_single("HEAD^{tree}").id)
    judging = Judging(
        repo, read_state(repo), "default", checked.plan, tree, time.time(), None, dict
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
