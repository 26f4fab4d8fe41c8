"""Attacks on the caches the gate trusts: the verdict memo, the schema-valid marks, the
fingerprint's kept index and the ledger's lookup cache (class "caches").

Each cache is state the agent can write or influence; a cache may only ever answer what the full
judgement would answer in the same state, so each attack changes what the full gate reads and
leaves the cache's key as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.adversarial.conftest import World, check, plan, step
from tests.agent.host import run_hook, stop
from tests.gitrepo import GitRepo, audit

IGNORED_PLAN = {
    "task": "the greeting reads its tool's verdict",
    "requirements": [{"id": "R", "description": "the tool says ok", "priority": "must"}],
    "ignored_paths": ["tools"],
    "steps": [
        {
            "id": "unit",
            "depends_on": [],
            "covers": ["R"],
            "verify": [{"type": "run", "argv": ["grep", "-qx", "ok", "tools/verdict"]}],
        }
    ],
}


CHANGED = "the declared ignored path 'tools' changed since the run that proved plan 'default'"


def _ignored_project(path: Path) -> GitRepo:
    repo = GitRepo.create(path)
    repo.write(".gitignore", "tools/\n")
    repo.write("tools/verdict", "ok\n")
    repo.write("app.py", "x = 1\n")
    repo.commit("app")
    done = audit(repo.path, "init")
    assert done.code == 0, done.out + done.err
    repo.write_plan(IGNORED_PLAN)
    done = audit(repo.path, "plan", "seal", "--reason", "first version")
    assert done.code == 0, done.out + done.err
    repo.git("add", "-A")
    repo.git("commit", "-q", "--no-verify", "-m", "plan")
    return repo


@pytest.mark.parametrize("remembered_by", ["run", "status", "push-judgement"])
def test_attack_caches_memo_serves_the_stop_hook_a_pass_relying_on_ignored_paths(
    tmp_path: Path, remembered_by: str
) -> None:
    """The run that proved the tree read the declared ignored path tools/verdict; a PASS is
    remembered (by the run itself, by `status`, or judged for a push of HEAD). The agent then
    changes tools/verdict, which the tree and the memo's state do not cover, and stops: the
    stop hook took the remembered PASS (all three allowed the stop before the fix); the full
    gate says UNKNOWN, and so does the hook now."""
    repo = _ignored_project(tmp_path / "project")
    ran = audit(repo.path, "run")
    assert ran.code == 0, ran.out + ran.err
    if remembered_by == "status":
        assert audit(repo.path, "status").code == 0
    elif remembered_by == "push-judgement":
        assert audit(repo.path, "status", "--for", "refs/heads/main", "HEAD").code == 0
    repo.write("tools/verdict", "changed\n")  # what the run relied on, outside the tree
    run = run_hook(repo.path, "stop", stop(repo.path))
    assert run.blocked, run.stdout + run.stderr
    assert CHANGED in run.reason
    judged = audit(repo.path, "status")
    assert judged.code == 3 and judged.out.startswith("UNKNOWN") and CHANGED in judged.out


NO_EVIDENCE = "not targeted and no evidence for this tree"
UNIT_READS_SRC = plan(
    step("unit", check("grep", "-q", "good", "src.py")), step("lint", check("true"))
)


@pytest.mark.parametrize("filed", ["a run of the older tree", "a run of another plan"])
def test_attack_caches_lookup_rows_make_a_targeted_run_carry_a_foreign_pass(
    world: World, filed: str
) -> None:
    """unit passed on an older tree; the agent commits src.py that unit fails on, then files
    a row in the lookup cache listing, for the new tree under plan default's contract, a run
    in which unit passed: default's run of the older tree, or a run of plan other (whose unit
    is `true`) for the new tree. The honest runner's `git audit run lint` took the row's run
    as this tree's own and signed unit as carried from it: PASS (the gate then said FAIL,
    evidence.carried-invalid; both variants). The run now reads the signed record and keeps
    only this plan's runs of this tree and contract: unit is not carried (not targeted, no
    evidence for this tree), and the run and the gate say UNKNOWN."""
    world.repo.write("src.py", "good = True\n")
    world.seal(UNIT_READS_SRC)
    older = world.run()
    assert older.verdict == "PASS"
    world.repo.write("src.py", "bad = True\n")
    world.repo.commit("unit fails on this tree")
    tree = world.repo.head_tree()
    source = older.commit
    if filed == "a run of another plan":
        world.seal(plan(step("unit"), step("lint")), "other")
        tree = world.repo.head_tree()
        other = world.run("other")
        assert other.verdict == "PASS" and other.tree == tree
        source = other.commit
    with sqlite3.connect(world.handle().state_dir / "index.sqlite") as db:
        plan_name, seq, _, _, contract, _, when = db.execute(
            "SELECT * FROM runs WHERE plan='default' ORDER BY seq DESC"
        ).fetchone()
        db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?)",
            (plan_name, -seq, source, tree, contract, "PASS", when),
        )
    recorded = world.run(targets=["lint"])
    unit = recorded.doc["steps"]["unit"]
    assert (unit["status"], unit["reason"]) == ("not-run", NO_EVIDENCE), unit
    assert recorded.verdict == "UNKNOWN"
    judged = world.gate()
    assert judged.verdict == "UNKNOWN"
    (default,) = [p for p in judged.plans if p.name == "default"]
    assert [r.code for r in default.reasons] == ["step.not-run"]
