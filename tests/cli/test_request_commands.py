"""`git audit request seal/show/diff`, `trust add --role planner` and the request in `plan
history`, end to end through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

from tests.gitrepo import GitRepo, audit
from tests.plan.builders import two_step_plan

REQUEST = {
    "task": "build and use an artifact",
    "requirements": [
        {"id": "REQ-1", "description": "the artifact is built", "priority": "must"},
        {"id": "REQ-2", "description": "the artifact is used", "priority": "should"},
    ],
}


def ok(repo: GitRepo, *args: str) -> str:
    result = audit(repo.path, *args)
    assert result.code == 0, (args, result.out, result.err)
    return result.out


def keys(repo: GitRepo, hermetic: Path) -> tuple[str, str]:
    """alice (sealer, via `trust init`) and agent (planner): their private key paths."""
    ok(repo, "keys", "generate", "--name", "alice")
    ok(repo, "keys", "generate", "--name", "agent")
    folder = hermetic / ".config" / "gitaudit" / "keys"
    alice, agent = str(folder / "alice"), str(folder / "agent")
    ok(repo, "trust", "init", "--key", alice)
    added = ok(
        repo, "trust", "add", f"{agent}.pub", "--role", "planner", "--name", "agent", "--key", alice
    )
    assert added.startswith("trusted agent as planner (SHA256:")
    return alice, agent


def test_request_seal_show_diff_and_history(repo: GitRepo, hermetic: Path) -> None:
    alice, agent = keys(repo, hermetic)
    repo.write_json(".gitaudit/requests/default.json", REQUEST)
    sealed = ok(repo, "request", "seal", "-m", "what I want", "--key", alice)
    assert "sealed the request of plan 'default' v1 (initial)" in sealed
    assert "no plan is sealed for it yet" in sealed
    shown = audit(repo.path, "request", "show")
    assert shown.code == 1 and "no plan is sealed for it" in shown.out
    repo.write_plan(two_step_plan())
    assert "sealed plan 'default' v1 (initial)" in ok(repo, "plan", "seal", "--key", agent)
    shown = audit(repo.path, "request", "show", "--json")
    assert shown.code == 0, shown.out
    (entry,) = shown.json()["requests"]
    assert entry["state"] == "sealed" and entry["answered"] and entry["version"] == 1
    assert [r["covered_by"] for r in entry["requirements"]] == [["build"], ["use"]]
    text = ok(repo, "request", "show")
    assert "REQ-1 [must] the artifact is built  <- build" in text
    assert "answered by plan 'default' v1" in text
    # the user adds REQ-3: the diff, the seal, the gap
    more = json.loads(json.dumps(REQUEST))
    more["requirements"].append({"id": "REQ-3", "description": "it is signed"})
    repo.write_json(".gitaudit/requests/default.json", more)
    assert "strengthened requirement REQ-3: added" in ok(repo, "request", "diff")
    assert "(the working file differs" in audit(repo.path, "request", "show").out
    resealed = ok(repo, "request", "seal", "--key", alice)
    assert "request requirement REQ-3 (must) is not among the plan's requirements" in resealed
    diff = ok(repo, "plan", "diff")
    assert "request      request requirement REQ-3 (must) is not among the plan's" in diff
    history = audit(repo.path, "plan", "history", "--json").json()
    assert [(e["format"], e["version"]) for e in history] == [
        ("gitaudit.request-seal/1", 2),
        ("gitaudit.seal/1", 1),
        ("gitaudit.request-seal/1", 1),
    ]
    text = ok(repo, "plan", "history")
    assert "default request v2 strengthened by alice" in text
    assert "answers request v1" in text


def test_request_errors_are_one_line(repo: GitRepo, hermetic: Path) -> None:
    alice, agent = keys(repo, hermetic)
    none = audit(repo.path, "request", "seal", "--key", alice)
    assert none.code == 2 and none.err.startswith("error: no requests in .gitaudit/requests/")
    repo.write(".gitaudit/requests/default.json", '{"requirements": [{"id": "A"}]}')
    bad = audit(repo.path, "request", "seal", "--key", alice)
    assert bad.code == 1
    assert bad.err.splitlines()[0] == (
        "error: .gitaudit/requests/default.json: $.requirements[0].description: "
        "a requirement needs a description"
    )
    repo.write_json(".gitaudit/requests/default.json", REQUEST)
    by_agent = audit(repo.path, "request", "seal", "--key", agent)
    assert by_agent.code == 1 and "is not a sealer" in by_agent.err.splitlines()[0]
    unknown = audit(repo.path, "trust", "add", f"{agent}.pub", "--role", "boss", "--name", "x")
    assert unknown.code == 2 and "--role planner" in unknown.err
    other = audit(repo.path, "request", "show", "--plan", "other")
    assert other.code == 2 and "no request for plan 'other'" in other.err
