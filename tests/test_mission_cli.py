"""Mission control end to end on seed 003's release scenario, with real evidence."""

from __future__ import annotations

import json

from tests.gitrepo import GitRepo, audit
from tests.plan.builders import fixture

CHECK = """import sys
step = sys.argv[1]
sys.exit(1 if step == "provider_attestation" else 0)
"""
DONE = [
    "freeze_candidate",
    "functional_eval",
    "security_eval",
    "provider_attestation",
    "independent_test",
    "residency_evidence",
]


def release_repo(repo: GitRepo, *, canary_timeout: float | None = None) -> None:
    plan = fixture("plans/release-mission.json")
    for step in plan["steps"]:
        for out in step.get("outputs", []):
            repo.write(out["verify"][0]["path"], "{}\n")
        if step["id"] == "deploy_canary" and canary_timeout is not None:
            step["verify"] = [{"type": "run", "argv": ["sleep", "30"], "timeout": canary_timeout}]
    repo.write("mission/check.py", CHECK)
    repo.write_plan(plan, "release")
    repo.commit("the release mission")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        assert audit(repo.path, *args).code == 0
    run = audit(repo.path, "run", *DONE, "--plan", "release")
    assert run.code in (1, 3), run.out + run.err


def test_frontier_route_and_ratio_from_seed_003(repo: GitRepo) -> None:
    release_repo(repo)
    nxt = audit(repo.path, "next", "--json").json()["plans"][0]
    assert nxt["ready"] == ["risk_approval"]
    blocked = {b["step"]: b["needs"] for b in nxt["blocked"]}
    assert blocked["deploy_canary"] == ["clause 1 needs risk_approval=pending"]
    route = audit(repo.path, "route", "--json").json()["plans"][0]
    assert route["completion_ratio"] == 0.5
    assert route["routes"][0]["cost"] == 5.5
    assert set(route["routes"][0]["steps"]) == {
        "risk_approval",
        "deploy_canary",
        "observe_readback",
        "release",
    }
    text = audit(repo.path, "route").out
    assert "cheapest remaining cost 5.5" in text and "completion ratio 50%" in text


def test_repair_cone(repo: GitRepo) -> None:
    release_repo(repo)
    cone = audit(repo.path, "impact", "independent_test", "--json").json()["plans"][0]
    assert cone["reopened"] == ["independent_test", "residency_evidence"]
    assert cone["goal_viable"] is False
    by_path = audit(repo.path, "impact", "--paths", "mission/check.py", "--json").json()["plans"][0]
    assert "freeze_candidate" in by_path["invalidated"]


def test_graph_status_colours_the_states(repo: GitRepo) -> None:
    release_repo(repo)
    mermaid = audit(repo.path, "plan", "graph", "--status").out
    assert 's_risk_approval["risk_approval: Record accountable risk approval"]:::ready' in mermaid
    assert ":::failed" in mermaid and ":::verified" in mermaid and ":::blocked" in mermaid
    dot = audit(repo.path, "plan", "graph", "--status", "--format", "dot").out
    assert 'fillcolor="#fff3c4"' in dot


def test_route_receipt_records_the_or_choice(repo: GitRepo) -> None:
    release_repo(repo)
    doc = json.loads(repo.git("show", "refs/audit/runs/release:run.json"))
    (clause,) = doc["route"]["clauses"]
    assert clause["step"] == "residency_evidence" and clause["selected"] == "independent_test"
    assert clause["alternatives"] == {
        "provider_attestation": "failed",
        "independent_test": "passed",
    }


def test_a_canary_that_times_out_is_unknown_and_needs_reconciliation(repo: GitRepo) -> None:
    release_repo(repo, canary_timeout=0.5)
    assert audit(repo.path, "run", "risk_approval", "deploy_canary", "--plan", "release").code == 3
    nxt = audit(repo.path, "next", "--json").json()["plans"][0]
    assert nxt["needs_reconcile"] == ["deploy_canary"]
    again = audit(repo.path, "run", "deploy_canary", "--plan", "release")
    doc = json.loads(repo.git("show", "refs/audit/runs/release:run.json"))
    assert (
        again.code == 3 and "reconcile before retrying" in doc["steps"]["deploy_canary"]["reason"]
    )
