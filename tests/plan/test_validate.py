"""Every validation rule, with its stable code and message, on real plan bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitaudit.plan.problems import ValidationReport
from gitaudit.plan.validate import validate_bytes
from tests.plan.builders import fixture, run_check, two_step_plan


def check(data: Any, *, raw: bytes | None = None) -> ValidationReport:
    payload = raw if raw is not None else json.dumps(data).encode()
    _, report = validate_bytes(payload, name="p", source=".gitaudit/plans/p.json")
    return report


def codes(report: ValidationReport) -> list[str]:
    return [p.code for p in report.errors]


def only(report: ValidationReport, code: str) -> Any:
    found = [p for p in report.errors if p.code == code]
    assert found, f"expected {code}, got {[p.render() for p in report.problems]}"
    return found[0]


def test_baseline_is_valid() -> None:
    report = check(two_step_plan())
    assert report.valid, [p.render() for p in report.problems]


# --- layer 1: parse -----------------------------------------------------------------------


def test_invalid_json_reports_line_and_column() -> None:
    report = check(None, raw=b'{\n  "steps": [\n    {"id": 1,,}\n  ]\n}\n')
    problem = only(report, "json.invalid")
    assert "line 3, column" in problem.message
    assert problem.source == ".gitaudit/plans/p.json"


def test_duplicate_keys_are_rejected() -> None:
    report = check(None, raw=b'{"steps": [], "steps": []}')
    assert "'steps' appears twice" in only(report, "json.duplicate-key").message


def test_nan_is_rejected() -> None:
    assert codes(check(None, raw=b'{"steps": [{"id": 1, "cost": NaN}]}')) == ["json.invalid"]


def test_non_utf8_is_rejected() -> None:
    assert codes(check(None, raw=b'{"task": "\xff"}')) == ["json.encoding"]


# --- layer 2: schema ----------------------------------------------------------------------


def test_unknown_field_suggests_the_close_match() -> None:
    plan = two_step_plan()
    plan["steps"][0]["depnds_on"] = plan["steps"][0].pop("depends_on")
    problem = only(check(plan), "schema.unknown-field")
    assert problem.path == "$.steps[0]"
    assert "'depnds_on' -> 'depends_on'" in problem.hint


def test_unknown_check_field_is_caught_per_type() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0]["patern"] = "x"
    problem = only(check(plan), "schema.unknown-field")
    assert problem.path == "$.steps[0].verify[0]"


def test_every_schema_violation_is_reported_not_only_the_first() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0] = {"type": "regex", "path": "x"}  # pattern missing
    plan["steps"][1]["cost"] = -1
    plan["requirements"][0]["priority"] = "urgent"
    report = check(plan)
    paths = {p.path for p in report.errors}
    assert {"$.steps[0].verify[0]", "$.steps[1].cost", "$.requirements[0].priority"} <= paths


def test_unknown_check_type() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"].append({"type": "vibes"})
    assert only(check(plan), "schema.enum").path == "$.steps[0].verify[1].type"


def test_run_needs_argv_or_cmd() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0] = {"type": "run"}
    assert "schema.required" in codes(check(plan))


def test_argv_and_cmd_together_are_rejected() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0] = {"type": "run", "argv": ["true"], "cmd": "true"}
    assert "schema.conflict" in codes(check(plan))


def test_bad_step_id() -> None:
    plan = two_step_plan()
    plan["steps"][0]["id"] = "Bad Id!"
    assert only(check(plan), "schema.step-id").path == "$.steps[0].id"


def test_invalid_duration() -> None:
    plan = two_step_plan()
    plan["steps"][0]["valid_for"] = "soon"
    assert only(check(plan), "duration.invalid").path == "$.steps[0].valid_for"


# --- layer 3: semantics -------------------------------------------------------------------


def test_duplicate_step_id() -> None:
    plan = two_step_plan()
    plan["steps"][1]["id"] = "build"
    problem = only(check(plan), "step.duplicate-id")
    assert problem.path == "$.steps[1].id" and "$.steps[0]" in problem.message


def test_integer_and_string_spellings_of_one_id_collide() -> None:
    plan = two_step_plan()
    plan["steps"][0]["id"] = 1
    plan["steps"][1]["id"] = "1"
    assert "step.duplicate-id" in codes(check(plan))


def test_duplicate_requirement_id() -> None:
    plan = two_step_plan()
    plan["requirements"][1]["id"] = "REQ-1"
    assert only(check(plan), "requirement.duplicate-id").path == "$.requirements[1].id"


def test_unknown_dependency() -> None:
    plan = two_step_plan()
    plan["steps"][1]["depends_on"] = ["ghost"]
    problem = only(check(plan), "dep.unknown-step")
    assert "'ghost'" in problem.message and problem.path == "$.steps[1].depends_on[0]"


def test_unknown_step_inside_any_of() -> None:
    plan = two_step_plan()
    plan["steps"][1]["depends_on"] = [{"any_of": ["build", "ghost"]}]
    assert only(check(plan), "dep.unknown-step").path == "$.steps[1].depends_on[0].any_of[1]"


def test_self_dependency() -> None:
    plan = two_step_plan()
    plan["steps"][0]["depends_on"] = ["build"]
    assert "step build depends on itself" in only(check(plan), "dep.self").message


def test_duplicate_edge() -> None:
    plan = two_step_plan()
    plan["steps"][1]["depends_on"] = ["build", "build"]
    assert only(check(plan), "dep.duplicate").path == "$.steps[1].depends_on[1]"


def test_cycle_names_the_steps_in_order() -> None:
    plan = two_step_plan()
    plan["steps"].append(
        {
            "id": "third",
            "depends_on": ["use"],
            "requires_outputs": [{"step": "use", "name": "u"}],
            "verify": [run_check()],
            "outputs": [{"name": "t", "verify": [{"type": "file_exists", "path": "t"}]}],
        }
    )
    plan["steps"][1]["outputs"] = [{"name": "u", "verify": [{"type": "file_exists", "path": "u"}]}]
    plan["steps"][0]["depends_on"] = ["third"]
    plan["steps"][0]["requires_outputs"] = [{"step": "third", "name": "t"}]
    problem = only(check(plan), "graph.cycle")
    assert "build -> third -> use -> build" in problem.message


def test_requires_outputs_unknown_output() -> None:
    plan = two_step_plan()
    plan["steps"][1]["requires_outputs"] = [{"step": "build", "name": "nope"}]
    problem = only(check(plan), "outputs.unknown-output")
    assert "declares no output 'nope' (it declares: artifact)" in problem.message


def test_requires_outputs_of_a_non_dependency() -> None:
    plan = two_step_plan()
    plan["steps"].insert(
        0,
        {
            "id": "other",
            "depends_on": [],
            "covers": ["REQ-1"],
            "verify": [run_check()],
            "outputs": [{"name": "o", "verify": [{"type": "file_exists", "path": "o"}]}],
        },
    )
    plan["steps"][2]["requires_outputs"].append({"step": "other", "name": "o"})
    assert (
        only(check(plan), "outputs.not-a-dependency").path == "$.steps[2].requires_outputs[1].step"
    )


def test_requires_outputs_unknown_step() -> None:
    plan = two_step_plan()
    plan["steps"][1]["requires_outputs"].append({"step": "ghost", "name": "x"})
    assert "outputs.unknown-step" in codes(check(plan))


def test_dependency_without_output_contract() -> None:
    plan = two_step_plan()
    del plan["steps"][1]["requires_outputs"]
    problem = only(check(plan), "dep.no-output-contract")
    assert problem.path == "$.steps[1].depends_on[0]"
    assert '"artifact"' in problem.hint


def test_each_or_alternative_needs_an_output_contract() -> None:
    plan = fixture("plans/release-mission.json")
    step = next(s for s in plan["steps"] if s["id"] == "residency_evidence")
    step["requires_outputs"] = [
        r for r in step["requires_outputs"] if r["step"] != "independent_test"
    ]
    problem = only(check(plan), "dep.no-output-contract")
    assert problem.path.endswith(".depends_on[0].any_of[1]")


def test_empty_any_of() -> None:
    plan = two_step_plan()
    plan["steps"][1]["depends_on"].append({"any_of": []})
    assert "dep.empty-any-of" in codes(check(plan))


def test_step_without_behavioural_check() -> None:
    plan = two_step_plan()
    plan["steps"][1]["verify"] = [{"type": "file_exists", "path": "x"}]
    assert only(check(plan), "step.no-behavioural-check").path == "$.steps[1].verify"


def test_output_without_check() -> None:
    plan = two_step_plan()
    plan["steps"][0]["outputs"][0]["verify"] = []
    assert only(check(plan), "output.no-check").path == "$.steps[0].outputs[0].verify"


def test_covers_unknown_requirement() -> None:
    plan = two_step_plan()
    plan["steps"][0]["covers"].append("REQ-404")
    assert only(check(plan), "covers.unknown-requirement").path == "$.steps[0].covers[1]"


def test_uncovered_must_requirement() -> None:
    plan = two_step_plan()
    plan["steps"][0]["covers"] = []
    problem = only(check(plan), "requirement.uncovered")
    assert "must requirement 'REQ-1'" in problem.message


def test_uncovered_may_requirement_is_fine() -> None:
    plan = two_step_plan()
    plan["requirements"].append({"id": "REQ-3", "description": "nice", "priority": "may"})
    assert check(plan).valid


def test_empty_requirements() -> None:
    plan = two_step_plan()
    plan["requirements"] = []
    for step in plan["steps"]:
        step["covers"] = []
    assert codes(check(plan)) == ["requirements.empty"]


def test_shell_with_argv() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0]["shell"] = True
    assert only(check(plan), "check.shell-with-argv").path == "$.steps[0].verify[0].shell"


def test_shell_with_cmd_is_allowed() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0] = {"type": "run", "cmd": "true && true", "shell": True}
    assert check(plan).valid


@pytest.mark.parametrize(
    ("field", "value"),
    [("cwd", "/etc"), ("cwd", "../up"), ("path", "a/../../b"), ("path", "/abs/file")],
)
def test_paths_escaping_the_workspace(field: str, value: str) -> None:
    plan = two_step_plan()
    target = (
        plan["steps"][0]["verify"][0]
        if field == "cwd"
        else plan["steps"][0]["outputs"][0]["verify"][0]
    )
    target[field] = value
    problem = only(check(plan), "path.escapes-workspace")
    assert repr(value) in problem.message


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("./junit.xml", "an empty or '.' component"),
        ("reports//junit.xml", "an empty or '.' component"),
        ("reports/./junit.xml", "an empty or '.' component"),
        (".git/junit.xml", "the repository itself or its git directory"),
        ("reports/.Git/junit.xml", "names a git directory"),
        (".git. /junit.xml", "names a git directory"),
        ("git~1/junit.xml", "names a git directory"),
        (".git:stream/junit.xml", "names a git directory"),
    ],
)
def test_an_artifact_path_a_git_tree_cannot_hold(path: str, why: str) -> None:
    """The run stores artifacts in its tree: a name git refuses there is refused up front."""
    plan = two_step_plan()
    plan["steps"][0]["artifacts"] = [path]
    problem = only(check(plan), "path.escapes-workspace")
    assert problem.message.startswith(f"artifact {path!r}: ") and why in problem.message


@pytest.mark.parametrize("path", ["junit.xml", "reports/junit.xml", "reports/", ".gitmodules"])
def test_a_plain_artifact_path_is_valid(path: str) -> None:
    plan = two_step_plan()
    plan["steps"][0]["artifacts"] = [path]
    assert "path.escapes-workspace" not in codes(check(plan))


@pytest.mark.parametrize(
    "name", [".", "..", ".git", ".GIT", ".git.", ".git ", "git~1", ".git::$DATA"]
)
def test_an_output_name_a_git_tree_cannot_hold(name: str) -> None:
    """The run stores an output's results under steps/<id>/outputs/<name>/: a name git refuses
    in a tree is refused up front, where the output is declared (and required)."""
    plan = two_step_plan()
    plan["steps"][0]["outputs"][0]["name"] = name
    plan["steps"][1]["requires_outputs"][0]["name"] = name
    problem = only(check(plan), "output.name-unstorable")
    assert problem.path == "$.steps[0].outputs[0].name" and repr(name) in problem.message


@pytest.mark.parametrize("name", ["artifact", "...", ".gitignore", "git~2", "a.git", "out put"])
def test_a_plain_output_name_is_valid(name: str) -> None:
    plan = two_step_plan()
    plan["steps"][0]["outputs"][0]["name"] = name
    plan["steps"][1]["requires_outputs"][0]["name"] = name
    assert codes(check(plan)) == []


def test_exec_path_escaping() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"].append({"type": "exec", "path": "../checker.sh"})
    assert "path.escapes-workspace" in codes(check(plan))


def test_invalid_regex() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"].append({"type": "regex", "path": "f", "pattern": "(unclosed"})
    assert only(check(plan), "regex.invalid").path == "$.steps[0].verify[1].pattern"


def test_invalid_output_regex() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0]["output_regex"] = "[a-"
    assert "regex.invalid" in codes(check(plan))


def test_unsplittable_cmd() -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"][0] = {"type": "run", "cmd": "echo 'unterminated"}
    assert "check.cmd-unparseable" in codes(check(plan))


def test_all_semantic_problems_are_reported_together() -> None:
    plan = two_step_plan()
    plan["steps"][0]["covers"] = ["REQ-404"]
    plan["steps"][1]["verify"] = [{"type": "file_exists", "path": "x"}]
    plan["steps"][1]["requires_outputs"] = [{"step": "build", "name": "nope"}]
    found = set(codes(check(plan)))
    assert {
        "covers.unknown-requirement",
        "requirement.uncovered",
        "step.no-behavioural-check",
        "outputs.unknown-output",
    } <= found


# --- layer 4: legacy sequential plans ------------------------------------------------------


def test_legacy_plan_is_sequential_without_output_contracts() -> None:
    plan = two_step_plan()
    for step in plan["steps"]:
        step.pop("depends_on", None)
        step.pop("requires_outputs", None)
    _, report = validate_bytes(json.dumps(plan).encode(), name="p", source="p.json")
    model, _ = validate_bytes(json.dumps(plan).encode(), name="p", source="p.json")
    assert report.valid
    assert model is not None and model.legacy
    assert [str(c) for c in model.steps[1].depends_on] == ["build"]
    assert model.steps[1].implicit_dependencies


# --- layer 5: environment -----------------------------------------------------------------


def test_missing_tool_is_an_environment_problem_not_an_invalid_plan() -> None:
    plan = two_step_plan()
    plan["required_tools"] = ["definitely-not-a-tool-xyz", "sh"]
    report = check(plan)
    assert report.valid
    assert [p.code for p in report.environment] == ["env.missing-tool"]
    assert report.environment[0].path == "$.required_tools[0]"


# --- compatibility and acceptance ---------------------------------------------------------


def test_plan_auditor_dogfood_plan_reads_with_status_ignored() -> None:
    raw = (fixture_path := "compat/dogfood-plan.json") and fixture(fixture_path)
    report = check(raw)
    assert report.valid
    assert [p.code for p in report.warnings] == ["step.status-ignored", "step.status-ignored"]


def test_plan_auditor_fib_plan_reads_but_cannot_pass() -> None:
    model, report = validate_bytes(
        json.dumps(fixture("compat/fib-plan.json")).encode(), name="fib", source="fib.json"
    )
    assert model is not None
    # its cmd string is split shell-like, without a shell
    run = next(c for c in model.steps[0].verify if c.type == "run")
    assert run.argv == ("python", "-c", "from fib import fib; assert fib(10)==55; assert fib(1)==1")
    assert not run.shell
    assert codes(report) == ["requirements.empty"]


@pytest.mark.parametrize(
    "name", ["plans/model-artifact.json", "plans/dataset-model.json", "plans/release-mission.json"]
)
def test_seed_plans_validate(name: str) -> None:
    report = check(fixture(name))
    assert report.valid, [p.render() for p in report.problems]


def test_release_mission_variants_are_rejected_with_the_right_codes() -> None:
    base = fixture("plans/release-mission.json")

    no_contract = json.loads(json.dumps(base))
    approval = next(s for s in no_contract["steps"] if s["id"] == "risk_approval")
    approval["requires_outputs"].pop(0)
    assert "dep.no-output-contract" in codes(check(no_contract))

    cycle = json.loads(json.dumps(base))
    freeze = cycle["steps"][0]
    freeze["depends_on"] = ["release"]
    cycle["steps"][-1]["outputs"] = [
        {"name": "r", "verify": [{"type": "file_exists", "path": "r"}]}
    ]
    freeze["requires_outputs"] = [{"step": "release", "name": "r"}]
    assert "graph.cycle" in codes(check(cycle))

    uncovered = json.loads(json.dumps(base))
    for step in uncovered["steps"]:
        if "REQ-SEC" in step.get("covers", []):
            step["covers"].remove("REQ-SEC")
    assert "requirement.uncovered" in codes(check(uncovered))


def test_float_spelling_of_an_integer_id_is_the_same_step() -> None:
    plan = two_step_plan()
    plan["steps"][0]["id"] = 1.0
    plan["steps"][1]["depends_on"] = [1]
    plan["steps"][1]["requires_outputs"] = [{"step": 1, "name": "artifact"}]
    assert check(plan).valid


def test_zero_duration_is_invalid() -> None:
    plan = two_step_plan()
    plan["steps"][0]["valid_for"] = "0s"
    assert only(check(plan), "duration.invalid").path == "$.steps[0].valid_for"


def test_large_legacy_plan_validates_quickly_enough_to_be_linear() -> None:
    """Not a timing test: 3,000 sequential steps must simply validate (a quadratic pass would
    take minutes here)."""
    steps = [{"id": i, "covers": ["R"], "verify": [run_check()]} for i in range(1, 3001)]
    steps[-1]["requires_outputs"] = [{"step": 1, "name": "o"}]
    steps[0]["outputs"] = [{"name": "o", "verify": [{"type": "file_exists", "path": "o"}]}]
    plan = {"requirements": [{"id": "R", "description": "r"}], "steps": steps}
    assert check(plan).valid


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("$.steps[0].id", lambda p: p["steps"][0].update(id="build\n")),
        ("$.requirements[0].id", lambda p: p["requirements"][0].update(id="REQ-1\n")),
        ("$.steps[0].runs_on[0]", lambda p: p["steps"][0].update(runs_on=["linux\n"])),
    ],
    ids=["step id", "requirement id", "runs_on label"],
)
def test_an_id_with_a_final_line_break_is_refused(where: str, edit: Any) -> None:
    """Python's `$` also matches before a final line break; JSON Schema's (and the compiled
    validator's) does not. "build\\n" passed as a valid step id: shown like "build", another id."""
    plan = two_step_plan()
    edit(plan)
    report = check(plan)
    assert not report.valid
    assert where in [p.path for p in report.errors], [p.render() for p in report.problems]


def test_a_plan_only_the_compiled_validator_refuses_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the two validators disagree, the compiled one's "invalid" stands: one problem at
    the root, never a plan taken as valid."""
    import jsonschema

    from gitaudit.plan import load

    monkeypatch.setattr(load, "_validator", lambda: jsonschema.Draft202012Validator({}))
    plan = two_step_plan()
    plan["steps"][0]["id"] = "Bad Id!"
    problem = only(check(plan), "schema.invalid")
    assert problem.path == "$"
