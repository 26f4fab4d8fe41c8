"""The request file: parsing (one-line errors naming the file and JSON path), whether a plan
answers it, and how two requests compare."""

from __future__ import annotations

import json
from typing import Any

import pygit2
import pytest

from gitaudit.errors import PlanError
from gitaudit.plan.load import load_plan
from gitaudit.plan.model import Plan
from gitaudit.plan.request import (
    Request,
    compare_requests,
    gaps,
    parse_request,
    read_tree,
    tree_names,
)
from tests.gitrepo import GitRepo
from tests.plan.builders import two_step_plan

SOURCE = ".gitaudit/requests/default.json"


def request(doc: Any) -> Request:
    return parse_request(json.dumps(doc).encode(), name="default", source=SOURCE)


def model(doc: dict[str, Any]) -> Plan:
    plan, problems = load_plan(json.dumps(doc).encode(), name="default", source="plan.json")
    assert plan is not None, problems
    return plan


ASKED = {
    "task": "build and use an artifact",
    "requirements": [
        {"id": "REQ-1", "description": "the artifact is built"},
        {"id": "REQ-2", "description": "the artifact is used", "priority": "should"},
    ],
}


def test_a_request_parses_with_must_as_the_default_priority() -> None:
    parsed = request(ASKED)
    assert parsed.ids == ("REQ-1", "REQ-2")
    assert [r.priority for r in parsed.requirements] == ["must", "should"]
    assert parsed.task == "build and use an artifact"
    assert request({"requirements": ASKED["requirements"]}).task == ""


@pytest.mark.parametrize(
    ("doc", "where", "words"),
    [
        ([], "$", "a request is a JSON object"),
        ({"requirements": [], "steps": []}, "$", "unknown field(s) 'steps'"),
        ({"requirements": []}, "$.requirements", "at least one requirement"),
        ({"task": 1, "requirements": [{"id": "A", "description": "a"}]}, "$.task", "string"),
        ({"requirements": ["A"]}, "$.requirements[0]", "is an object"),
        ({"requirements": [{"id": "-A", "description": "a"}]}, "$.requirements[0].id", "an id"),
        ({"requirements": [{"id": "A"}]}, "$.requirements[0].description", "description"),
        (
            {"requirements": [{"id": "A", "description": "a", "priority": "high"}]},
            "$.requirements[0].priority",
            "must, should or may",
        ),
        (
            {"requirements": [{"id": "A", "description": "a", "owner": "me"}]},
            "$.requirements[0]",
            "unknown field(s) 'owner'",
        ),
        (
            {"requirements": [{"id": "A", "description": "a"}, {"id": "A", "description": "b"}]},
            "$.requirements[1].id",
            "'A' appears twice",
        ),
    ],
)
def test_an_invalid_request_is_one_error_naming_file_and_path(
    doc: Any, where: str, words: str
) -> None:
    with pytest.raises(PlanError) as caught:
        request(doc)
    assert caught.value.message.startswith(f"{SOURCE}: {where}: "), caught.value.message
    assert words in caught.value.message
    assert caught.value.hint and "docs/plan-format.md#the-request" in caught.value.hint


def test_invalid_json_names_the_line() -> None:
    with pytest.raises(PlanError, match="line 1, column"):
        parse_request(b'{"requirements": [}', name="default", source=SOURCE)
    with pytest.raises(PlanError, match="appears twice in one object"):
        parse_request(b'{"task": "a", "task": "b"}', name="default", source=SOURCE)


def test_the_plan_answers_its_request_verbatim_and_covered() -> None:
    assert gaps(request(ASKED), model(two_step_plan())) == ()
    # a priority raised in the plan and a requirement of the plan's own still answer it
    plan = two_step_plan()
    plan["requirements"][1]["priority"] = "must"
    plan["requirements"].append({"id": "MINE", "description": "mine", "priority": "may"})
    assert gaps(request(ASKED), model(plan)) == ()


def test_each_way_of_not_answering_is_named() -> None:
    asked = request(
        {
            "requirements": [
                *ASKED["requirements"],
                {"id": "REQ-3", "description": "the artifact is signed"},
                {"id": "REQ-4", "description": "the artifact is small", "priority": "may"},
            ]
        }
    )
    plan = two_step_plan()
    plan["requirements"][0]["description"] = "something is built"
    plan["requirements"][1]["priority"] = "may"
    plan["requirements"].append({"id": "REQ-4", "description": "the artifact is small"})
    plan["steps"][0]["covers"].append("REQ-4")
    found = gaps(asked, model(plan))
    assert [(g.kind, g.requirement) for g in found] == [
        ("rewritten", "REQ-1"),
        ("lowered", "REQ-2"),
        ("missing", "REQ-3"),
    ]
    assert found[1].message == "request requirement REQ-2 (should) is lowered to may"
    assert found[2].message == (
        "request requirement REQ-3 (must) is not among the plan's requirements"
    )


def test_a_mandatory_request_requirement_must_be_covered() -> None:
    """A `should` request requirement the plan states but no step covers is a gap (the plan's
    own validation refuses such a plan too; the request rule says it on its own)."""
    asked = request(ASKED)
    plan = model(two_step_plan())
    stripped = Plan(
        plan.name,
        plan.source,
        plan.task,
        plan.requirements,
        plan.required_tools,
        tuple(s for s in plan.steps if "REQ-2" not in s.covers),
        plan.legacy,
    )
    assert [(g.kind, g.requirement) for g in gaps(asked, stripped)] == [("uncovered", "REQ-2")]


def test_requests_compare_like_plan_requirements() -> None:
    old = request(ASKED)
    new = request(
        {
            "requirements": [
                {"id": "REQ-1", "description": "the artifact is built, fast"},
                {"id": "REQ-2", "description": "the artifact is used", "priority": "must"},
                {"id": "REQ-3", "description": "new"},
            ]
        }
    )
    changes = {(c.kind, c.render()) for c in compare_requests(old, new).changes}
    assert changes == {
        ("weakened", "requirement REQ-1: description changed"),
        ("strengthened", "requirement REQ-2: priority should -> must"),
        ("strengthened", "requirement REQ-3: added"),
        ("neutral", "task: task text changed"),
    }
    assert compare_requests(new, old).weakened


def test_requests_are_found_in_a_git_tree(repo: GitRepo) -> None:
    repo.write_json(".gitaudit/requests/default.json", ASKED)
    repo.write(".gitaudit/requests/notes.txt", "not a request")
    repo.write(".gitaudit/requests/bad name.json", "{}")
    repo.commit("requests")
    git = pygit2.Repository(str(repo.path))
    tree = git.revparse_single("HEAD^{tree}")
    assert isinstance(tree, pygit2.Tree)
    assert tree_names(git, tree) == ["default"]
    data = read_tree(git, tree, "default")
    assert data is not None and json.loads(data) == ASKED
    assert read_tree(git, tree, "other") is None
